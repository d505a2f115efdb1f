// SPDX-License-Identifier: Apache-2.0
/*
 * table.c - what a benchmark measures: timing, medians, ratios to the
 * reference measured beside it, and the table rendered as text or JSON
 * (one struct bench_table for both, so they cannot drift apart).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
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
#include "kvm.h"
#include "fc_client.h"
#include "kernel/uffd.h"
#include "cli.h"
#include "util/clock.h"

/* ---- timing ------------------------------------------------------------- */

double bench_now(void)
{
	return now_s();
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_add_row(struct bench_table *t, const char *key, const char *label,
		  double *samples, int n, bool checksum_ok, double cited)
{
	if (t->nrows >= BENCH_MAX_ROWS)
		return -ENOSPC;

	struct bench_row *r = &t->rows[t->nrows];

	memset(r, 0, sizeof(*r));
	r->key = key;
	r->label = label;
	r->sec = bench_median(samples, n);
	r->samples_min = n ? samples[0] : 0;
	r->samples_max = n ? samples[n - 1] : 0;
	r->cited = cited;
	r->checksum_ok = checksum_ok;
	r->thp_frac = -1;
	r->faults = -1;
	r->copied = -1;
	r->cmp = -1;
	for (int c = 0; c < BENCH_MAX_COLS; c++)
		r->col[c] = NAN;
	return t->nrows++;
}

double bench_row_ratio(const struct bench_table *t, const struct bench_row *r)
{
	double ref = t->rows[r->cmp >= 0 ? r->cmp : t->ref].sec;

	if (r->ratio > 0)
		return r->ratio;
	return ref > 0 ? r->sec / ref : 0;
}

double bench_paired_ratio(const double *v, const double *ref, int n)
{
	double q[n > 0 ? n : 1];
	int k = 0;

	for (int i = 0; i < n; i++)
		if (ref[i] > 0)
			q[k++] = v[i] / ref[i];
	return bench_median(q, k);
}

void bench_add_kv(struct bench_table *t, const char *key, double val)
{
	if (t->nkv < BENCH_MAX_KV)
		t->kv[t->nkv++] = (struct bench_kv){ key, val };
}

/* ---- output ------------------------------------------------------------- */

double bench_unit_scale(const char *unit)
{
	if (!strcmp(unit, "ms"))
		return 1e3;
	if (!strcmp(unit, "us"))
		return 1e6;
	return 1;
}

static void fmt_size(char *buf, size_t n, uint64_t bytes)
{
	if (bytes >= GIB && !(bytes % (GIB / 100)))
		snprintf(buf, n, "%.2f GiB", (double)bytes / GIB);
	else if (bytes >= MIB)
		snprintf(buf, n, "%.0f MiB", (double)bytes / MIB);
	else
		snprintf(buf, n, "%llu KiB", (unsigned long long)(bytes >> 10));
}

void bench_print_table(const struct bench_table *t, FILE *f)
{
	double sc = bench_unit_scale(t->unit);
	bool thp = false, cited = false, faults = false;
	int lw = 40;	/* the label column: 40, or the longest label */
	int rp = t->ratio_prec ? t->ratio_prec : 2, rw = rp + 5;
	char sz[32];

	for (int i = 0; i < t->nrows; i++) {
		if ((int)strlen(t->rows[i].label) > lw)
			lw = (int)strlen(t->rows[i].label);
		thp |= t->rows[i].thp_frac >= 0;
		cited |= t->rows[i].cited >= 0;
		faults |= t->rows[i].faults >= 0;
	}
	fmt_size(sz, sizeof(sz), t->bytes);
	fprintf(f, "%s: %s\n", t->name, t->title);
	fprintf(f, "%s per run, median of %d run%s\n", sz, t->runs,
		t->runs == 1 ? "" : "s");
	if (t->cited)
		fprintf(f, "cited: %s\n", t->cited);
	fprintf(f, "\n");
	fprintf(f, "%-*s %10s", lw, "case", t->unit);
	if (t->per_gib)
		fprintf(f, " %10s", strcmp(t->unit, "s") ? "ms/GiB" : "s/GiB");
	fprintf(f, " %*s", rw, "vs ref");
	for (int c = 0; c < t->ncols; c++)
		fprintf(f, " %*s", t->cols[c].width, t->cols[c].label);
	if (faults)
		fprintf(f, " %7s %7s", "faults", "MiB cp");
	if (thp)
		fprintf(f, " %5s", "THP");
	fprintf(f, " %4s", "ok");
	if (cited)
		fprintf(f, "  cited %s", t->cited_unit);
	fprintf(f, "\n");
	for (int i = 0; i < t->nrows; i++) {
		const struct bench_row *r = &t->rows[i];
		double gsc = strcmp(t->unit, "s") ? 1e3 : 1;

		fprintf(f, "%-*s %10.4f", lw, r->label, r->sec * sc);
		if (t->per_gib)
			fprintf(f, " %10.4f",
				r->sec * gsc * (double)GIB / (double)t->bytes);
		fprintf(f, " %*.*fx", rw - 1, rp, bench_row_ratio(t, r));
		for (int c = 0; c < t->ncols; c++) {
			fputc(' ', f);
			if (isnan(r->col[c]))
				fprintf(f, "%*s", t->cols[c].width, "-");
			else
				fprintf(f, t->cols[c].fmt, t->cols[c].width,
					r->col[c]);
		}
		if (faults && r->faults >= 0)
			fprintf(f, " %7.0f %7.1f", r->faults,
				r->copied / (double)MIB);
		else if (faults)
			fprintf(f, " %7s %7s", "-", "-");
		if (thp) {
			if (r->thp_frac >= 0)
				fprintf(f, " %4.0f%%", r->thp_frac * 100);
			else
				fprintf(f, " %5s", "-");
		}
		fprintf(f, " %4s", r->checksum_ok ? "yes" : "NO");
		if (r->cited >= 0)
			fprintf(f, "  %g%s%s", r->cited,
				r->cited_note ? " " : "",
				r->cited_note ? r->cited_note : "");
		fprintf(f, "%s\n", i == t->ref ? "   <- reference" : "");
	}
	for (int i = 0; i < t->nkv; i++)
		fprintf(f, "%s: %g\n", t->kv[i].key, t->kv[i].val);
	if (t->notes[0])
		fprintf(f, "%s\n", t->notes);
	fprintf(f, "\n");
}

json_object *bench_machine_json(void)
{
	json_object *m = json_object_new_object();
	struct utsname u;
	char buf[256];
	FILE *f;

	if (uname(&u) == 0) {
		json_object_object_add(m, "kernel",
				       json_object_new_string(u.release));
		json_object_object_add(m, "arch",
				       json_object_new_string(u.machine));
	}
	f = fopen("/proc/cpuinfo", "re");
	while (f && fgets(buf, sizeof(buf), f)) {
		char *c = strchr(buf, ':');

		if (!strncmp(buf, "model name", 10) && c) {
			c[strcspn(c, "\n")] = 0;
			json_object_object_add(m, "cpu",
					       json_object_new_string(c + 2));
			break;
		}
	}
	if (f)
		fclose(f);
	json_object_object_add(m, "cpus",
		json_object_new_int((int)sysconf(_SC_NPROCESSORS_ONLN)));
	f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	if (f && fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\n")] = 0;
		json_object_object_add(m, "thp", json_object_new_string(buf));
	}
	if (f)
		fclose(f);
	json_object_object_add(m, "kvm", json_object_new_string(
				       kvm_describe(buf, sizeof(buf))));
	return m;
}

json_object *bench_table_json(const struct bench_table *t,
			       const struct bench_opts *o)
{
	json_object *j = json_object_new_object();
	json_object *res = json_object_new_object();
	json_object *facts = json_object_new_object();
	bool all_ok = true;

	json_object_object_add(j, "bench", json_object_new_string(t->name));
	json_object_object_add(j, "title", json_object_new_string(t->title));
	if (t->guest)
		json_object_object_add(j, "guest",
				       json_object_new_string(t->guest));
	if (t->cited) {
		json_object_object_add(j, "cited",
				       json_object_new_string(t->cited));
		json_object_object_add(j, "cited_unit",
				       json_object_new_string(t->cited_unit));
	}
	json_object_object_add(j, "unit", json_object_new_string(t->unit));
	json_object_object_add(j, "per_gib", json_object_new_boolean(t->per_gib));
	json_object_object_add(j, "bytes", json_object_new_int64((int64_t)t->bytes));
	json_object_object_add(j, "runs", json_object_new_int(t->runs));
	json_object_object_add(j, "quick", json_object_new_boolean(o->quick));
	json_object_object_add(j, "reference",
			       json_object_new_string(t->rows[t->ref].key));
	for (int i = 0; i < t->nrows; i++) {
		const struct bench_row *r = &t->rows[i];
		json_object *row = json_object_new_object();

		json_object_object_add(row, "label",
				       json_object_new_string(r->label));
		json_object_object_add(row, "seconds",
				       json_object_new_double(r->sec));
		json_object_object_add(row, "min",
				       json_object_new_double(r->samples_min));
		json_object_object_add(row, "max",
				       json_object_new_double(r->samples_max));
		if (t->per_gib)
			json_object_object_add(row, "sec_per_gib",
				json_object_new_double(r->sec * (double)GIB /
						       (double)t->bytes));
		json_object_object_add(row, "ratio",
			json_object_new_double(bench_row_ratio(t, r)));
		json_object_object_add(row, "ratio_to",
			json_object_new_string(t->rows[r->cmp >= 0 ? r->cmp :
						      t->ref].key));
		json_object_object_add(row, "checksum_ok",
				       json_object_new_boolean(r->checksum_ok));
		if (r->faults >= 0) {
			json_object_object_add(row, "faults",
				json_object_new_double(r->faults));
			json_object_object_add(row, "bytes_copied",
				json_object_new_double(r->copied));
		}
		for (int c = 0; c < t->ncols; c++)
			if (!isnan(r->col[c]))
				json_object_object_add(row, t->cols[c].key,
					json_object_new_double(r->col[c]));
		if (r->thp_frac >= 0)
			json_object_object_add(row, "thp_fraction",
				json_object_new_double(r->thp_frac));
		json_object_object_add(row, "cited", r->cited >= 0 ?
				       json_object_new_double(r->cited) : NULL);
		if (r->cited_note)
			json_object_object_add(row, "cited_note",
				json_object_new_string(r->cited_note));
		json_object_object_add(res, r->key, row);
		all_ok &= r->checksum_ok;
	}
	json_object_object_add(j, "results", res);
	for (int i = 0; i < t->nkv; i++)
		json_object_object_add(facts, t->kv[i].key,
				       json_object_new_double(t->kv[i].val));
	json_object_object_add(j, "facts", facts);
	if (t->notes[0])
		json_object_object_add(j, "notes",
				       json_object_new_string(t->notes));
	json_object_object_add(j, "all_ok", json_object_new_boolean(all_ok));
	json_object_object_add(j, "machine", bench_machine_json());
	return j;
}

