// SPDX-License-Identifier: Apache-2.0
/*
 * probe.c - `faultline probe --json` reports the kernel's userfaultfd
 * features (MOVE among them on this project's machines), hugetlb and KVM.
 */
#include <json-c/json.h>
#include <string.h>

#include "tap.h"

static int has(json_object *arr, const char *name)
{
	for (size_t i = 0; arr && i < json_object_array_length(arr); i++)
		if (!strcmp(json_object_get_string(json_object_array_get_idx(arr, i)), name))
			return 1;
	return 0;
}

int main(void)
{
	char buf[16384];
	FILE *p = popen("build/faultline probe --json", "r");
	size_t n = p ? fread(buf, 1, sizeof(buf) - 1, p) : 0;
	int rc = p ? pclose(p) : -1;
	json_object *o, *uf, *feat, *hp, *kvm, *x;

	buf[n] = 0;
	ok(rc == 0 && n > 0, "probe --json exits 0 with output");
	o = json_tokener_parse(buf);
	ok(o != NULL, "output is JSON");
	ok(json_object_object_get_ex(o, "userfaultfd", &uf) &&
	   json_object_object_get_ex(uf, "features", &feat), "has userfaultfd.features");
	ok(has(feat, "MOVE") && has(feat, "EVENT_REMOVE") && has(feat, "POISON"),
	   "features include MOVE, EVENT_REMOVE, POISON");
	ok(json_object_object_get_ex(uf, "range_ioctls", &x) && has(x, "COPY") &&
	   has(x, "ZEROPAGE"), "range ioctls include COPY and ZEROPAGE");
	ok(json_object_object_get_ex(o, "hugetlb", &hp) &&
	   json_object_object_get_ex(hp, "available", &x), "reports hugetlb");
	ok(json_object_object_get_ex(o, "kvm", &kvm) &&
	   json_object_object_get_ex(kvm, "present", &x) &&
	   json_object_object_get_ex(kvm, "pre_fault_memory", &x),
	   "reports KVM and KVM_PRE_FAULT_MEMORY");
	p = popen("build/faultline probe --bogus 2>&1", "r");
	n = p ? fread(buf, 1, sizeof(buf) - 1, p) : 0;
	buf[n] = 0;
	ok(p && pclose(p) != 0 && strstr(buf, "faultline probe: unknown option '--bogus'; see `faultline help probe`") &&
	   !strstr(buf, "usage"), "bad flag: one line and where the usage is, non-zero exit");
	json_object_put(o);
	return done_testing();
}
