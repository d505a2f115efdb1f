// SPDX-License-Identifier: Apache-2.0
/*
 * serve_jail.c - docs/firecracker.md's "Serving a jailed Firecracker",
 * step by step: a VMM running as another uid (the jailer's --uid) is
 * served when the socket is given to it (--socket-owner), cannot connect
 * to a socket left to root, and is refused and killed, with the log line
 * saying why, when the socket was chowned by hand but the daemon was not
 * told (the guide's old advice) or --allow-uid leaves it out.
 *
 * Decision: the client maps its memory and creates its uffd as root, then
 * becomes the jail's uid before it connects: the daemon judges the peer
 * by SO_PEERCRED at connect, and creating a uffd unprivileged is the
 * VMM's own matter (vm.unprivileged_userfaultfd or /dev/userfaultfd, as
 * the guide says), not what is tested here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve_util.h"

#define MIB		(1ULL << 20)
#define JAIL_UID	65534	/* nobody: the jailer's --uid */

static struct mem_file mem;

/* Exit codes of the client, as su_reap() returns them. */
enum { SERVED = 0, WRONG = 1, NO_MAP = 10, NO_UID = 11, NO_CONNECT = 12 };

/* The jailed VMM: memory and uffd made, then uid JAIL_UID, then connect. */
static int jailed_client(void *arg)
{
	const char *sock = arg;
	uint64_t size = 8 * MIB;
	struct fc_client c;

	if (fc_client_map(&c, 1, &size, FC_PAGE_4K))
		return NO_MAP;
	if (setgid(JAIL_UID) < 0 || setuid(JAIL_UID) < 0)
		return NO_UID;
	if (fc_client_connect(&c, sock))
		return NO_CONNECT;
	int bad = su_verify_client(&mem, &c, SU_FORWARD, "jailed");

	fc_client_close(&c);
	return bad ? WRONG : SERVED;
}

static int run_jailed(struct serve *s)
{
	return su_reap(su_spawn(jailed_client, s->sock),
		       SU_CHILD_TIMEOUT * 1000);
}

/*
 * A daemon started with extra (NULL-terminated) options, or a bail; its
 * socket in a directory the jail's uid owns (the jail's root, as the
 * jailer makes it), so that the socket's own mode decides.
 */
static void start(struct serve *s, const char *const *extra)
{
	serve_init(s);
	if (chown(s->dir, JAIL_UID, JAIL_UID) < 0)
		BAIL("chown %s: %s", s->dir, strerror(errno));
	if (serve_start(s, mem.path, extra))
		BAIL("the daemon did not start");
}

static void stop(struct serve *s, const char *what)
{
	ok(serve_stop(s) == 0, "%s: the daemon stops cleanly", what);
	serve_cleanup(s);
}

/* The guide's way: --socket-owner UID gives the socket to the jail. */
static void socket_owner(void)
{
	static const char *const opt[] = { "--socket-owner", "65534:65534",
					   NULL };
	struct serve s;
	struct stat st;

	start(&s, opt);
	ok(stat(s.sock, &st) == 0 && st.st_uid == JAIL_UID &&
	   st.st_gid == JAIL_UID && (st.st_mode & 0777) == 0600,
	   "--socket-owner 65534:65534: the socket is 65534's, mode 0600");
	is_int(run_jailed(&s), SERVED, "--socket-owner: the jailed client "
	       "is served, every byte right");
	stop(&s, "--socket-owner");
}

/* Nothing said: the socket is root's, 0600: the jail cannot connect. */
static void root_only(void)
{
	struct serve s;

	start(&s, NULL);
	is_int(run_jailed(&s), NO_CONNECT, "no --socket-owner: the jailed "
	       "client cannot connect (EACCES), nothing handed over");
	stop(&s, "no --socket-owner");
}

/*
 * A peer the daemon does not serve: refused at accept, by SO_PEERCRED,
 * with a warning naming why.  Whether it had sent its uffd by then is the
 * scheduler's choice: if it had, it is killed (its faults would never be
 * answered) and the line says so; if not, its send fails and it knows at
 * once.  Never served, never left waiting.  chowned: the socket given by
 * hand (chown), the daemon told nothing; else --allow-uid leaving it out.
 */
static void refused(bool chowned)
{
	static const char *const opt[] = { "--socket-owner", "65534",
					   "--allow-uid", "0", NULL };
	const char *what = chowned ? "chown by hand, no --socket-owner" :
				     "--allow-uid 0 --socket-owner 65534";
	struct serve s;
	char line[512] = "";

	start(&s, chowned ? NULL : opt);
	long mark = serve_log_mark(&s);

	if (chowned && chown(s.sock, JAIL_UID, JAIL_UID) < 0)
		BAIL("chown %s: %s", s.sock, strerror(errno));
	int st = run_jailed(&s);
	bool logged = serve_log_find(&s, mark, 0, (const char *[]){
				     "uid not allowed", NULL }, 5000, line,
				     sizeof(line));

	ok(logged && ((st == -SIGKILL && strstr(line, "client killed")) ||
		      (st == NO_CONNECT && strstr(line, "no uffd was handed "
						  "over"))),
	   "%s: refused, %s (status %d): %s", what, st == -SIGKILL ?
	   "killed: it had sent its uffd" : "its send failed", st, line);
	stop(&s, what);
}

int main(void)
{
	if (geteuid() != 0)
		skip_all_missing("root", "the client becomes another uid");
	if (mem_file_create(&mem, 8 * MIB, 0x1a11) < 0 ||
	    chmod(mem.path, 0600) < 0)
		BAIL("no memory file");
	socket_owner();
	root_only();
	refused(true);
	refused(false);
	mem_file_destroy(&mem);
	return done_testing();
}
