// SPDX-License-Identifier: Apache-2.0
/*
 * s3_lock.c - the locks of a chunk store in a bucket (s3_store.h): an
 * object PREFIX/locks/KIND-ID naming its owner (host, pid, ID) and its
 * lease, renewed while held, taken over by another once the lease has
 * run out.
 *
 * Decisions: time is the store's, never a host's.  A lock's age is the
 * Date of a GET of it minus its Last-Modified, so hosts whose clocks
 * disagree still agree on it; stale is older than the lease its body
 * names.  The holder renews it (a PUT over it, then a HEAD for its new
 * Last-Modified) every quarter lease from a thread of its own.  A taker
 * judges it stale only once the store's clock is past the last renewal
 * plus the lease, so a renewal landing a whole lease after the one before
 * may have crossed a takeover: the lock counts as lost, as it does when
 * it is gone (a taker deletes it), and a lost lock is never renewed
 * again.  Between renewals the holder counts the lease down by the time
 * elapsed since it asked (a monotonic clock, durations only, one second
 * short for the store's whole-second dates).  So an index is put only
 * after a renewal confirms the lock, a gc deletes only while its count
 * runs, and a paused process that wakes up past its lease stops.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "faultline.h"
#include "store/s3_lock.h"
#include "store/s3_store.h"
#include "util/clock.h"
#include "util/error.h"

#define LEASE_MIN	2
#define LEASE_MAX	86400
#define NS		1000000000ull

struct s3_lock {
	struct s3_store *s;
	char name[64];		/* under PREFIX/ */
	char what[1200];	/* its spec, for messages */
	char body[320];		/* what it holds: kind, owner, lease */
	unsigned int lease;	/* s */
	pthread_mutex_t renewing; /* one renewal at a time */
	pthread_mutex_t mu;	/* guards what follows */
	pthread_cond_t cv;
	time_t lm;		/* the store's time of its last renewal */
	uint64_t until;		/* monotonic ns: surely ours until then */
	char lost[1500];		/* why it is ours no more, "" */
	bool stop;
	bool thread;
	pthread_t tid;
};

static int lease_get(const char *spec, unsigned int *lease)
{
	const char *v = getenv(S3_LEASE_ENV);
	char *end;
	unsigned long n;

	*lease = S3_LEASE_DEFAULT;
	if (!v || !*v)
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n < LEASE_MIN || n > LEASE_MAX)
		return fl_err(-EINVAL, "%s: %s=%s: not a number of seconds "
			      "from %d to %d", spec, S3_LEASE_ENV, v, LEASE_MIN,
			      LEASE_MAX);
	*lease = (unsigned int)n;
	return 0;
}

static void lose(struct s3_lock *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* l is ours no more: why, kept for every check after. */
static void lose(struct s3_lock *l, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&l->mu);
	if (!l->lost[0])
		snprintf(l->lost, sizeof(l->lost), "%s: %s", l->what, why);
	pthread_mutex_unlock(&l->mu);
}

/*
 * Put l over itself and read its new Last-Modified: 0, -ESTALE once l is
 * lost (l->lost says why), or another -errno with one line (it may be
 * tried again).
 */
static int renew(struct s3_lock *l)
{
	uint64_t t0 = now_ns();
	struct s3_stat st;
	int ret;

	pthread_mutex_lock(&l->renewing);
	if (s3_lock_check(l, false) < 0) {
		ret = -ESTALE;
		goto out;
	}
	ret = s3_store_stat(l->s, l->name, NULL, 0, &st);
	if (!ret)
		ret = s3_store_replace(l->s, l->name, l->body, strlen(l->body));
	if (!ret)
		ret = s3_store_stat(l->s, l->name, NULL, 0, &st);
	if (ret == -ENOENT) {
		lose(l, "taken over: deleted by another");
		ret = -ESTALE;
	} else if (!ret && (!st.lm || st.lm - l->lm >= (time_t)l->lease)) {
		lose(l, "renewed %lld s after it last was, a whole lease "
		     "(%u s) by the store's clock: it may have been taken "
		     "over", (long long)(st.lm - l->lm), l->lease);
		s3_store_delete(l->s, l->name);	/* put again by us: away */
		ret = -ESTALE;
	} else if (!ret) {
		pthread_mutex_lock(&l->mu);
		l->lm = st.lm;
		l->until = t0 + (l->lease - 1) * NS;
		pthread_mutex_unlock(&l->mu);
	}
out:
	pthread_mutex_unlock(&l->renewing);
	return ret;
}

/* Renew l every quarter lease until it is dropped or lost. */
static void *renewer(void *arg)
{
	struct s3_lock *l = arg;
	uint64_t period = l->lease * NS / 4;

	pthread_mutex_lock(&l->mu);
	while (!l->stop && !l->lost[0]) {
		uint64_t t = now_ns() + period;
		struct timespec ts = { (time_t)(t / NS), (long)(t % NS) };

		pthread_cond_timedwait(&l->cv, &l->mu, &ts);
		if (l->stop)
			break;
		pthread_mutex_unlock(&l->mu);
		renew(l);	/* failed: tried again, lost: the loop ends */
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* The locks in the way of ours: their count, the first's name. */
struct lock_scan {
	struct s3_store *s;
	const char *own;
	bool exclusive;
	unsigned int lease;	/* ours: for a lock that names none */
	int n;
	char first[128];
	long long left;		/* the first's lease left, s; -1 unknown */
};

/*
 * The lock name of another, stale by the store's clock?  Then it is
 * taken over (deleted, said in one line): 1, as when it is gone; 0 if it
 * is live; -errno with one line.
 */
static int take_over(struct lock_scan *sc, const char *name)
{
	char body[512], owner[160] = "no owner named";
	unsigned int lease = sc->lease, l;
	struct s3_stat st;
	const char *p;
	long long age;
	int ret = s3_store_stat(sc->s, name, body, sizeof(body), &st);

	if (ret == -ENOENT)
		return 1;	/* taken away meanwhile */
	if (ret < 0)
		return ret;
	if ((p = strstr(body, "\nlease ")) && sscanf(p + 7, "%u", &l) == 1 &&
	    l >= LEASE_MIN)
		lease = l;
	if ((p = strstr(body, "\nowner ")))
		snprintf(owner, sizeof(owner), "%.*s",
			 (int)strcspn(p + 7, "\n"), p + 7);
	age = (long long)st.date - (long long)st.lm;
	if (!st.date || !st.lm || age <= (long long)lease) {
		if (!sc->n)
			sc->left = st.date && st.lm ? lease - age + 1 : -1;
		return 0;
	}
	ret = s3_store_delete(sc->s, name);
	if (ret < 0)
		return ret;
	fprintf(stderr, "faultline: %s%s: taken over: not renewed for %lld s "
		"by the store's clock, past its lease of %u s (%s)\n",
		s3_store_spec(sc->s), name, age, lease, owner);
	return 1;
}

static int lock_seen(void *arg, const char *name, uint64_t size)
{
	struct lock_scan *sc = arg;
	int ret;

	(void)size;
	if (!strcmp(name, sc->own) ||
	    (!sc->exclusive && strncmp(name, S3_LOCKS "gc-", 9)))
		return 0;
	ret = take_over(sc, name);
	if (ret)
		return ret > 0 ? 0 : ret;
	if (!sc->n++)
		snprintf(sc->first, sizeof(sc->first), "%s", name);
	return 0;
}

static void lock_free(struct s3_lock *l)
{
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	pthread_mutex_destroy(&l->renewing);
	free(l);
}

/* A new lock for s, not yet put: NULL with a message, or it. */
static struct s3_lock *lock_new(struct s3_store *s, bool exclusive)
{
	const char *kind = exclusive ? "gc" : "create";
	struct s3_lock *l = calloc(1, sizeof(*l));
	pthread_condattr_t ca;
	char host[64] = "?";
	uint64_t rnd;

	if (!l) {
		fl_err(-ENOMEM, "%s: no memory for a lock", s3_store_spec(s));
		return NULL;
	}
	if (lease_get(s3_store_spec(s), &l->lease) < 0) {
		free(l);
		return NULL;
	}
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		fl_err(-EIO, "%s: no random lock name", s3_store_spec(s));
		free(l);
		return NULL;
	}
	l->s = s;
	snprintf(l->name, sizeof(l->name), S3_LOCKS "%s-%016" PRIx64, kind,
		 rnd);
	snprintf(l->what, sizeof(l->what), "%s%s", s3_store_spec(s), l->name);
	gethostname(host, sizeof(host) - 1);
	snprintf(l->body, sizeof(l->body), "faultline image %s\nowner host "
		 "%s pid %d id %016" PRIx64 "\nlease %u s\n", kind, host,
		 getpid(), rnd, l->lease);
	pthread_mutex_init(&l->renewing, NULL);
	pthread_mutex_init(&l->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cv, &ca);
	pthread_condattr_destroy(&ca);
	return l;
}

/* Put l, note its lease's start, list the others: 0, or -errno. */
static int lock_try(struct s3_lock *l, struct lock_scan *sc)
{
	uint64_t t0 = now_ns(), size;
	struct s3_stat st;
	char why[1600];
	int ret = s3_store_put(l->s, l->name, l->body, strlen(l->body), &size);

	if (ret)
		return ret;
	ret = s3_store_stat(l->s, l->name, NULL, 0, &st);
	if (ret == -ENOENT)
		ret = fl_err(-EIO, "%s: gone right after its PUT", l->what);
	if (!ret) {
		l->lm = st.lm;
		l->until = t0 + (l->lease - 1) * NS;
		ret = s3_store_list(l->s, S3_LOCKS, lock_seen, sc);
	}
	if (ret) {		/* ours is there: never leave it */
		snprintf(why, sizeof(why), "%s", fl_last_error());
		s3_store_delete(l->s, l->name);
		fl_err(ret, "%s", why);
	}
	return ret;
}

int s3_lock_take(struct s3_store *s, bool exclusive, struct s3_lock **out)
{
	unsigned int ms = 250, waited = 0;
	struct s3_lock *l = lock_new(s, exclusive);
	char left[96];
	int ret;

	if (!l)
		return -EINVAL;
	for (;;) {
		struct lock_scan sc = { .s = s, .own = l->name, .lease = l->lease,
					.exclusive = exclusive };

		ret = lock_try(l, &sc);
		if (ret || !sc.n)
			break;
		s3_store_delete(s, l->name);
		if (exclusive || waited >= S3_LOCK_WAIT_MS) {
			snprintf(left, sizeof(left), sc.left < 0 ? "the store "
				 "sends no Date: delete it" : "taken over in "
				 "%lld s, its lease by the store's clock",
				 sc.left);
			ret = fl_err(-EBUSY, "%s%s is held (%d lock%s there): %s "
				     "(a lock left by one that died: %s)",
				     s3_store_spec(s), sc.first, sc.n,
				     sc.n == 1 ? "" : "s", exclusive ?
				     "a create or a gc is writing into the "
				     "store; nothing was deleted, run gc again "
				     "once it is done" : "a gc is sweeping the "
				     "store; create again once it is done",
				     left);
			break;
		}
		usleep(ms * 1000);	/* a gc is running: it ends soon */
		waited += ms;
		ms = ms < 4000 ? 2 * ms : ms;
	}
	if (!ret && (ret = -pthread_create(&l->tid, NULL, renewer, l)) < 0) {
		s3_store_delete(s, l->name);
		fl_err(ret, "%s: cannot start renewing it", l->what);
	}
	if (ret) {
		lock_free(l);
		return ret;
	}
	l->thread = true;
	*out = l;
	return 0;
}

int s3_lock_check(struct s3_lock *l, bool strict)
{
	char why[1600] = "";

	pthread_mutex_lock(&l->mu);
	if (l->lost[0])
		snprintf(why, sizeof(why), "%s", l->lost);
	else if (strict && now_ns() >= l->until)
		snprintf(why, sizeof(why), "%s: not renewed within its lease "
			 "of %u s: it may have been taken over", l->what,
			 l->lease);
	pthread_mutex_unlock(&l->mu);
	return why[0] ? fl_err(-ESTALE, "%s", why) : 0;
}

int s3_lock_confirm(struct s3_lock *l)
{
	int ret = renew(l);

	if (ret == -ESTALE || !ret)
		return s3_lock_check(l, true);
	return ret;
}

const char *s3_lock_name(const struct s3_lock *l)
{
	return l->name;
}

void s3_lock_drop(struct s3_store *s, struct s3_lock *l)
{
	if (!l)
		return;
	if (l->thread) {
		pthread_mutex_lock(&l->mu);
		l->stop = true;
		pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->tid, NULL);
	}
	s3_store_delete(s, l->name);
	lock_free(l);
}

static const struct s3_held_ops held_ops = {
	.check = s3_lock_check,
	.confirm = s3_lock_confirm,
	.name = s3_lock_name,
	.drop = s3_lock_drop,
};

int s3_store_lock(struct s3_store *s, bool exclusive)
{
	struct s3_lock *l;
	int ret;

	if (s3_store_held(s))
		return fl_err(-EALREADY, "%s: a lock is held already",
			      s3_store_spec(s));
	ret = s3_lock_take(s, exclusive, &l);
	if (!ret)
		s3_store_hold(s, l, &held_ops);
	return ret;
}

void s3_store_unlock(struct s3_store *s)
{
	s3_lock_drop(s, s3_store_held(s));
	s3_store_hold(s, NULL, NULL);
}
