// SPDX-License-Identifier: Apache-2.0
/*
 * parent.c - the parent of a diff image being created: opened (a file,
 * or an image by URL or s3:// through the source that serves it), its
 * size the raw diff's, and never the file the new image replaces.
 *
 * Decision: a remote parent is read through fl_source_open, the same path
 * a restore takes, so its chain and its store are found as they will be.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "faultline.h"
#include "author/parent.h"
#include "format/image.h"
#include "source/layers.h"
#include "source/source.h"
#include "store/store.h"
#include "util/error.h"

/*
 * A parent by URL or s3://: its header, read through the source that
 * serves it (the chain below it is opened, and not read).
 */
static int open_parent_remote(const char *pp, const char *image_path,
			      const char *raw_path, const struct stat *raw,
			      struct image_header *out)
{
	const struct image *img;
	struct fl_source *s;
	int ret;

	if (!strcmp(pp, image_path))
		return fl_err(-EINVAL, "%s is the parent %s itself: the image "
			      "would replace its parent", image_path, pp);
	ret = fl_source_open(pp, &s);
	if (ret < 0)
		return ret;
	img = source_image(source_layers_at(s, source_layers_count(s) - 1));
	if (!img)
		ret = fl_err(-EINVAL, "--parent %s: not a faultline image", pp);
	else if (img->hdr.total_size != (uint64_t)raw->st_size)
		ret = fl_err(-EINVAL, "%s is %llu bytes, its parent %s is "
			     "%llu bytes: not a diff of that image",
			     raw_path, (unsigned long long)raw->st_size, pp,
			     (unsigned long long)img->hdr.total_size);
	else
		*out = img->hdr;
	fl_source_put(s);
	return ret;
}

/*
 * The parent of a diff image: an image (of any version, a diff too) of
 * the diff's size, and not the file the new image will replace.
 */
int create_open_parent(const char *pp, const char *image_path,
		       const char *raw_path, const struct stat *raw,
		       struct image_header *out)
{
	const char *slash = strrchr(pp, '/');
	struct image *p;
	struct stat st, img_st;
	int ret;

	if (!image_name_ok(slash ? slash + 1 : pp))
		return fl_err(-EINVAL, "--parent %s: its file name cannot be "
			      "recorded (1 to %d bytes, no control "
			      "characters)", pp, IMAGE_NAME_MAX);
	if (stat(pp, &st) == 0 && stat(image_path, &img_st) == 0 &&
	    st.st_dev == img_st.st_dev && st.st_ino == img_st.st_ino)
		return fl_err(-EINVAL, "%s is the parent %s itself: the image "
			      "would replace its parent", image_path, pp);
	if (!store_spec_local(pp))	/* a URL, s3:// */
		return open_parent_remote(pp, image_path, raw_path, raw, out);
	ret = image_open(pp, &p);
	if (ret < 0)
		return ret;
	if (p->hdr.total_size != (uint64_t)raw->st_size) {
		ret = fl_err(-EINVAL, "%s is %llu bytes, its parent %s is "
			     "%llu bytes: not a diff of that image",
			     raw_path, (unsigned long long)raw->st_size, pp,
			     (unsigned long long)p->hdr.total_size);
		image_close(p);
		return ret;
	}
	*out = p->hdr;
	image_close(p);
	return 0;
}
