// SPDX-License-Identifier: Apache-2.0
/*
 * plot.c - `faultline bench plot`: gnuplot charts from a --json file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench.h"
#include "fc_client.h"
#include "kernel/uffd.h"
#include "cli.h"
#include "util/clock.h"

/* ---- plot --------------------------------------------------------------- */

static void plot_label(FILE *g, const char *s)
{
	fputc('"', g);
	for (; *s; s++)
		if (*s != '"' && *s != '\\')
			fputc(*s, g);
	fputc('"', g);
}

static int plot_one(json_object *b, const char *dir, const char *name)
{
	json_object *res, *v;
	const char *unit = "s", *cited_unit = "", *title = name;
	bool per_gib = false;
	uint64_t bytes = GIB;
	char path[4096];
	int status;

	if (!json_object_object_get_ex(b, "results", &res))
		return -EINVAL;
	if (json_object_object_get_ex(b, "unit", &v))
		unit = json_object_get_string(v);
	if (json_object_object_get_ex(b, "cited_unit", &v))
		cited_unit = json_object_get_string(v);
	if (json_object_object_get_ex(b, "title", &v))
		title = json_object_get_string(v);
	if (json_object_object_get_ex(b, "per_gib", &v))
		per_gib = json_object_get_boolean(v);
	if (json_object_object_get_ex(b, "bytes", &v))
		bytes = (uint64_t)json_object_get_int64(v);
	if (strchr(dir, '\'') || strchr(name, '\''))
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/bench-%s.png", dir, name);

	/* Plot per-GiB values when the table has them: the cited figures' unit. */
	double sc = bench_unit_scale(unit);
	const char *yl = unit;

	if (per_gib) {
		sc = strcmp(unit, "s") ? 1e3 : 1;
		yl = strcmp(unit, "s") ? "ms per GiB" : "s per GiB";
		sc *= (double)GIB / (double)bytes;
	}
	const char *cmp = per_gib ? (strcmp(unit, "s") ? "ms/GiB" : "s/GiB") :
			  unit;
	bool cited_same = !strcmp(cited_unit, cmp);

	FILE *g = popen("gnuplot", "w");

	if (!g)
		return -errno;
	fprintf(g, "set terminal pngcairo size 1100,600 noenhanced "
		   "font 'sans,10'\n");
	fprintf(g, "set output '%s'\n", path);
	fprintf(g, "set title ");
	plot_label(g, title);
	fprintf(g, "\nset ylabel '%s (log scale)'\n", yl);
	fprintf(g, "set logscale y\nset grid ytics\n"
		   "set style data histograms\n"
		   "set style histogram clustered gap 1\n"
		   "set style fill solid 0.8 border -1\nset boxwidth 0.9\n"
		   "set xtics rotate by -25 left\nset key top left\n"
		   "set datafile missing '-'\nset bmargin 8\nset rmargin 14\n");
	fprintf(g, "$data << EOD\n");
	json_object_object_foreach(res, key, row) {
		json_object *lab, *sec, *cited;
		double s;

		(void)key;
		if (!json_object_object_get_ex(row, "seconds", &sec))
			continue;
		s = json_object_get_double(sec) * sc;
		if (!json_object_object_get_ex(row, "label", &lab))
			lab = NULL;
		plot_label(g, lab ? json_object_get_string(lab) : key);
		fprintf(g, " %.9g", s > 0 ? s : 1e-9);
		if (cited_same &&
		    json_object_object_get_ex(row, "cited", &cited) &&
		    cited && json_object_get_double(cited) > 0)
			fprintf(g, " %.9g\n", json_object_get_double(cited));
		else
			fprintf(g, " -\n");
	}
	fprintf(g, "EOD\n");
	fprintf(g, "plot $data using 2:xtic(1) title 'this machine'");
	if (cited_same)
		fprintf(g, ", '' using 3 title 'cited'");
	fprintf(g, "\n");
	status = pclose(g);
	if (status == -1)
		return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "faultline bench plot: gnuplot failed for %s "
			"(is gnuplot installed? apt-get install gnuplot-nox)\n",
			name);
		return -EIO;
	}
	printf("%s\n", path);
	return 0;
}

int bench_plot(const char *file, const char *dir)
{
	json_object *j = json_object_from_file(file), *bs;
	char dbuf[4096];
	int ret = 0, n = 0;

	if (!j) {
		fprintf(stderr, "faultline bench plot: %s: not a JSON file "
			"(from `faultline bench all`)\n", file);
		return 1;
	}
	if (!dir) {
		const char *sl = strrchr(file, '/');

		snprintf(dbuf, sizeof(dbuf), "%.*s",
			 sl ? (int)(sl - file) : 1, sl ? file : ".");
		dir = dbuf[0] ? dbuf : "/";
	}
	if (json_object_object_get_ex(j, "benchmarks", &bs)) {
		json_object_object_foreach(bs, name, b) {
			if (json_object_object_get_ex(b, "skipped", NULL))
				continue;	/* e.g. criu without root */
			int r = plot_one(b, dir, name);

			if (r < 0 && !ret)
				ret = r;
			n += r == 0;
		}
	} else if (json_object_object_get_ex(j, "bench", &bs)) {
		ret = plot_one(j, dir, json_object_get_string(bs));
		n += ret == 0;
	} else {
		ret = -EINVAL;
	}
	json_object_put(j);
	if (ret < 0 || !n) {
		fprintf(stderr, "faultline bench plot: %s: %s\n", file,
			ret == -EINVAL ? "no benchmark results in it" :
			strerror(-ret));
		return 1;
	}
	return 0;
}

