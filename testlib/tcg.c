// SPDX-License-Identifier: Apache-2.0
/*
 * tcg.c - tcg_reexec(): a KVM test re-run inside qemu-system-x86_64 TCG
 * where this machine has no usable /dev/kvm (tcg.h).
 *
 * The VM needs no tools and no staging tree: its initramfs is written here
 * as plain cpio "newc" straight from the host's files (busybox, the test,
 * the libraries ldd says they load, the kvm modules), and its kernel is
 * Debian's, extracted from the package rather than installed (no initramfs
 * or bootloader hooks). The test's output comes back on a second serial
 * port, apart from the kernel console, so kernel messages never mix into
 * its TAP.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/kvm.h>

#include "tcg.h"

#define DEFAULT_ROOT	"build/tcg"
#define DEFAULT_TIMEOUT	240		/* seconds */
#define EXIT_TAG	"FL_TCG_EXIT="	/* the last line on ttyS1 */
#define TAIL_LINES	20
/*
 * One emulated CPU: with two (multi-threaded TCG) the nested guest froze
 * the whole VM now and then (seen in about 1 run in 4 of tests/vmm); a
 * guest's vCPUs still run as threads, one at a time.  FL_TCG_CPUS sets it
 * (to see the freeze: for i in 1 2 3 4; do FL_TCG_CPUS=2 FL_FORCE_TCG=1
 * build/tests/vmm; done).
 */
#define TCG_CPUS	(getenv("FL_TCG_CPUS") ? getenv("FL_TCG_CPUS") : "1")
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* Loaded in this order; ccp is kvm-amd's (SEV) dependency. */
static const char *const kvm_mods[] = {
	"kernel/virt/lib/irqbypass.ko",
	"kernel/drivers/crypto/ccp/ccp.ko",
	"kernel/arch/x86/kvm/kvm.ko",
	"kernel/arch/x86/kvm/kvm-amd.ko",
};

/* What the VM is made of, all found before anything is built. */
struct vm {
	char qemu[PATH_MAX];
	char busybox[PATH_MAX];
	char kernel[PATH_MAX];	/* vmlinux (ELF, booted by PVH) or vmlinuz */
	char moddir[PATH_MAX];	/* the kernel's lib/modules/VERSION */
	const char *version;	/* in moddir */
	char exe[PATH_MAX];	/* this program */
	char cwd[PATH_MAX];
};

/* The VM's files, in a temporary directory. */
enum { F_INITRD, F_CONSOLE, F_OUT, F_QEMU, N_FILES };
static const char *const vm_names[N_FILES] = {
	"initramfs.cpio", "console.log", "out.log", "qemu.log",
};
static char vm_dir[PATH_MAX];

static const char *vm_path(int i)
{
	static char path[N_FILES][PATH_MAX + 16];

	snprintf(path[i], sizeof(path[i]), "%s/%s", vm_dir, vm_names[i]);
	return path[i];
}

static void vm_cleanup(void)
{
	if (!vm_dir[0])
		return;
	if (getenv("KEEP_LOGS")) {
		printf("# TCG VM files kept in %s\n", vm_dir);
	} else {
		for (int i = 0; i < N_FILES; i++)
			unlink(vm_path(i));
		rmdir(vm_dir);
	}
	vm_dir[0] = '\0';
}

__attribute__((format(printf, 1, 2), noreturn))
static void bail(const char *fmt, ...)
{
	va_list ap;

	vm_cleanup();
	printf("Bail out! ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(1);
}

static bool forced(void)
{
	const char *force = getenv("FL_FORCE_TCG");

	return force && *force && strcmp(force, "0");
}

bool tcg_kvm_usable(void)
{
	int fd, version;

	if (forced())
		return false;
	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	version = ioctl(fd, KVM_GET_API_VERSION, 0);
	close(fd);
	return version == KVM_API_VERSION;
}

/* The whole of a file, NUL-terminated, in malloc'd memory; 0 or -errno. */
static int read_file(const char *path, char **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	ssize_t got = 0;
	size_t n = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !(*buf = malloc(st.st_size + 1))) {
		n = errno;
		close(fd);
		return -(int)n;
	}
	while (n < (size_t)st.st_size &&
	       (got = read(fd, *buf + n, st.st_size - n)) > 0)
		n += got;
	close(fd);
	if (got < 0) {
		free(*buf);
		return -EIO;
	}
	(*buf)[n] = '\0';
	*len = n;
	return 0;
}

/* s as one single-quoted shell word. */
static void sh_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	}
	fputc('\'', f);
}

/*
 * The initramfs: a cpio "newc" archive, each path once, parent directories
 * first (the kernel's unpacker creates none).
 */
struct cpio {
	FILE *f;
	unsigned int ino;
	char **names;
	size_t n;
};

/* 1 if name is new (and now remembered), 0 if written already, -ENOMEM. */
static int cpio_new_name(struct cpio *c, const char *name)
{
	char **names;

	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->names[i], name))
			return 0;
	names = realloc(c->names, (c->n + 1) * sizeof(*names));
	if (!names)
		return -ENOMEM;
	c->names = names;
	c->names[c->n] = strdup(name);
	return c->names[c->n++] ? 1 : -ENOMEM;
}

static int cpio_entry(struct cpio *c, const char *name, unsigned int mode,
		      const char *data, size_t len)
{
	static const char zero[4];
	size_t nlen = strlen(name) + 1;

	/* magic, ino, mode, uid, gid, nlink, mtime, filesize, dev and rdev
	 * major/minor, namesize, check: 110 bytes */
	fprintf(c->f, "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X",
		++c->ino, mode, 0, 0, 1, 0, len, 0, 0, 0, 0, nlen, 0);
	fwrite(name, 1, nlen, c->f);
	fwrite(zero, 1, (4 - (110 + nlen) % 4) % 4, c->f);
	if (len)
		fwrite(data, 1, len, c->f);
	fwrite(zero, 1, (4 - len % 4) % 4, c->f);
	return ferror(c->f) ? -EIO : 0;
}

/* An absolute path in the VM, after its parent directories. */
static int cpio_add(struct cpio *c, const char *path, unsigned int mode,
		    const char *data, size_t len)
{
	char dir[PATH_MAX];
	int ret;

	for (const char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(s - path), path);
		ret = cpio_new_name(c, dir);
		if (ret > 0)
			ret = cpio_entry(c, dir + 1, S_IFDIR | 0755, NULL, 0);
		if (ret < 0)
			return ret;
	}
	ret = cpio_new_name(c, path);
	if (ret > 0)
		ret = cpio_entry(c, path + 1, mode, data, len);
	return ret < 0 ? ret : 0;
}

/* The host file src as path in the VM, with its permissions. */
static int cpio_file(struct cpio *c, const char *path, const char *src)
{
	struct stat st;
	size_t len;
	char *data;
	int ret;

	ret = stat(src, &st) ? -errno : read_file(src, &data, &len);
	if (!ret) {
		ret = cpio_add(c, path, S_IFREG | (st.st_mode & 07777),
			       data, len);
		free(data);
	}
	if (ret)
		printf("# TCG initramfs: %s: %s\n", src, strerror(-ret));
	return ret;
}

/* A file and, if it is a dynamic program, every library ldd lists. */
static int cpio_program(struct cpio *c, const char *path, const char *src)
{
	char line[PATH_MAX + 64], *cmd, *lib;
	size_t len;
	FILE *p;
	int ret;

	ret = cpio_file(c, path, src);
	if (ret)
		return ret;
	p = open_memstream(&cmd, &len);
	if (!p)
		return -ENOMEM;
	fputs("ldd ", p);
	sh_quote(p, src);
	fputs(" 2>/dev/null", p);
	fclose(p);
	p = popen(cmd, "r");
	free(cmd);
	if (!p)
		return -errno;
	/* "\tlibc.so.6 => /lib/.../libc.so.6 (0x...)", "\t/lib64/ld-... (0x...)" */
	while (!ret && fgets(line, sizeof(line), p)) {
		lib = strstr(line, "=> ");
		lib = lib ? lib + 3 : line + strspn(line, " \t");
		lib[strcspn(lib, " \n")] = '\0';
		if (lib[0] == '/')
			ret = cpio_file(c, lib, lib);
	}
	pclose(p);
	return ret;
}

/* Environment entries worth passing on: not those of this machine. */
static bool env_passed(const char *var)
{
	static const char *const mine[] = {
		"PATH", "PWD", "OLDPWD", "SHLVL", "_", "FL_FORCE_TCG",
	};
	size_t n = strcspn(var, "=");

	if (!var[n] || !n || isdigit((unsigned char)var[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)var[i]) && var[i] != '_')
			return false;
	for (size_t i = 0; i < ARRAY_SIZE(mine); i++)
		if (strlen(mine[i]) == n && !strncmp(var, mine[i], n))
			return false;
	return true;
}

/* /init, first part: mount what tests expect; all output to ttyS1. */
static void init_head(FILE *s, const char *bb)
{
	fprintf(s, "#!%s sh\n%s mkdir -p /bin /sbin /usr/bin /usr/sbin\n"
		"%s --install -s\n", bb, bb, bb);
	fputs("export PATH=/usr/sbin:/usr/bin:/sbin:/bin\n"
	      "mkdir -p /proc /sys /dev /tmp /run\n"
	      "mount -t proc proc /proc\n"
	      "mount -t sysfs sysfs /sys\n"
	      "mount -t devtmpfs devtmpfs /dev\n"
	      "mkdir -p /dev/hugepages /dev/shm\n"
	      /* not over the test's own files (a checkout under /tmp) */
	      "for d in /tmp /run; do\n"
	      "\t[ \"$(ls -A $d)\" ] || mount -t tmpfs tmpfs $d\n"
	      "done\n"
	      "mount -t tmpfs tmpfs /dev/shm\n"
	      "mount -t hugetlbfs hugetlbfs /dev/hugepages\n"
	      "ip link set lo up\n"
	      "exec >/dev/ttyS1 2>&1 </dev/null\n"
	      "stty -F /dev/ttyS1 raw -echo\n", s);
}

/* /init, last part: the test as it was run here, its status, power off. */
static void init_run(FILE *s, const struct vm *vm, int argc, char **argv)
{
	extern char **environ;

	fputs("mkdir -p ", s);
	sh_quote(s, vm->cwd);
	fputs(" && cd ", s);
	sh_quote(s, vm->cwd);
	fputc('\n', s);
	for (char **e = environ; *e; e++) {
		if (!env_passed(*e))
			continue;
		fprintf(s, "export %.*s=", (int)strcspn(*e, "="), *e);
		sh_quote(s, strchr(*e, '=') + 1);
		fputc('\n', s);
	}
	fputs("export FL_IN_TCG=1\n", s);
	sh_quote(s, vm->exe);
	for (int i = 1; i < argc; i++) {
		fputc(' ', s);
		sh_quote(s, argv[i]);
	}
	/* Closing ttyS1 waits until the UART has sent it all. */
	fputs("\necho " EXIT_TAG "$?\nexec >/dev/null 2>&1\npoweroff -f\n", s);
}

/* The files, then the kvm modules (with their insmod lines), then /init. */
static int build_initramfs(const struct vm *vm, int argc, char **argv,
			   const char *const *files)
{
	struct cpio c = { .f = fopen(vm_path(F_INITRD), "we") };
	char path[PATH_MAX + 64], src[PATH_MAX + 64], *init = NULL;
	size_t len;
	FILE *s;
	int ret;

	if (!c.f)
		return -errno;
	s = open_memstream(&init, &len);
	if (!s) {
		fclose(c.f);
		return -ENOMEM;
	}
	init_head(s, vm->busybox);
	ret = cpio_program(&c, vm->busybox, vm->busybox);
	if (!ret)
		ret = cpio_program(&c, vm->exe, vm->exe);
	for (; !ret && files && *files; files++) {
		if ((*files)[0] == '/')
			snprintf(path, sizeof(path), "%s", *files);
		else
			snprintf(path, sizeof(path), "%s/%s", vm->cwd, *files);
		ret = cpio_program(&c, path, *files);
	}
	for (size_t i = 0; !ret && i < ARRAY_SIZE(kvm_mods); i++) {
		snprintf(src, sizeof(src), "%s/%s", vm->moddir, kvm_mods[i]);
		if (access(src, R_OK))
			continue;	/* ccp: built in, or not needed */
		snprintf(path, sizeof(path), "/lib/modules/%s/%s",
			 vm->version, kvm_mods[i]);
		ret = cpio_file(&c, path, src);
		fprintf(s, "insmod %s 2>&1 | sed 's/^/# /'\n", path);
	}
	init_run(s, vm, argc, argv);
	fclose(s);
	if (!ret)
		ret = cpio_add(&c, "/init", S_IFREG | 0755, init, len);
	if (!ret)
		ret = cpio_entry(&c, "TRAILER!!!", 0, NULL, 0);
	if (fclose(c.f) && !ret)
		ret = -errno;
	free(init);
	for (size_t i = 0; i < c.n; i++)
		free(c.names[i]);
	free(c.names);
	return ret;
}

/* name in $PATH; 0 or -ENOENT. */
static int find_exe(const char *name, char *path, size_t size)
{
	const char *dirs = getenv("PATH"), *end;

	if (!dirs || !*dirs)
		dirs = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
	for (const char *d = dirs;; d = end + 1) {
		end = strchrnul(d, ':');
		snprintf(path, size, "%.*s/%s", (int)(end - d), d, name);
		if (!access(path, X_OK))
			return 0;
		if (!*end)
			return -ENOENT;
	}
}

/* A kernel with a kvm-amd module: extracted under root, else installed. */
static int find_kernel(struct vm *vm, const char *root)
{
	const char *const roots[] = { root, "" };
	char pattern[PATH_MAX + 32], amd[PATH_MAX + 64];
	glob_t g;

	for (size_t i = 0; i < ARRAY_SIZE(roots); i++) {
		snprintf(pattern, sizeof(pattern), "%s/boot/vmlinuz-*", roots[i]);
		if (glob(pattern, 0, NULL, &g))
			continue;
		for (size_t j = g.gl_pathc; j-- > 0;) {
			const char *version = strrchr(g.gl_pathv[j], '/') +
					      strlen("/vmlinuz-");

			snprintf(vm->moddir, sizeof(vm->moddir),
				 "%s/lib/modules/%s", roots[i], version);
			snprintf(amd, sizeof(amd), "%s/%s", vm->moddir,
				 kvm_mods[ARRAY_SIZE(kvm_mods) - 1]);
			if (access(amd, R_OK))
				continue;
			/* decompressed by make tcg-kernel: 4 s less under TCG */
			snprintf(vm->kernel, sizeof(vm->kernel),
				 "%s/boot/vmlinux-%s", roots[i], version);
			if (access(vm->kernel, R_OK))
				snprintf(vm->kernel, sizeof(vm->kernel), "%s",
					 g.gl_pathv[j]);
			vm->version = strrchr(vm->moddir, '/') + 1;
			globfree(&g);
			return 0;
		}
		globfree(&g);
	}
	return -ENOENT;
}

/* ttyS1 as it arrives, a line at a time; its exit line is kept back. */
struct lines {
	char buf[4096];
	size_t len;
	int status;		/* the test's exit status, or -1 */
};

static void lines_flush(struct lines *l)
{
	char *tag;

	l->buf[l->len] = '\0';
	l->buf[strcspn(l->buf, "\r")] = '\0';
	tag = strstr(l->buf, EXIT_TAG);
	if (tag) {
		l->status = atoi(tag + strlen(EXIT_TAG));
		*tag = '\0';
	}
	if (!tag || tag > l->buf)
		puts(l->buf);
	l->len = 0;
}

static void lines_read(struct lines *l, int fd)
{
	char chunk[4096];
	ssize_t n;

	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			if (chunk[i] != '\n')
				l->buf[l->len++] = chunk[i];
			if (chunk[i] == '\n' || l->len == sizeof(l->buf) - 1)
				lines_flush(l);
		}
	}
	fflush(stdout);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Boot the VM and copy the test's output: its exit status or -errno. */
static int run_vm(const struct vm *vm, int timeout, double *secs)
{
	char con[PATH_MAX + 32], out[PATH_MAX + 32];
	const char *argv[] = {
		vm->qemu, "-accel", "tcg", "-cpu", "max",
		"-smp", TCG_CPUS, "-m", "1G", "-nodefaults", "-no-user-config",
		"-display", "none", "-no-reboot",
		"-serial", con, "-serial", out,
		"-kernel", vm->kernel, "-initrd", vm_path(F_INITRD),
		"-append", getenv("FL_TCG_VERBOSE") ? "console=ttyS0 panic=-1 mitigations=off softlockup_panic=0" : "console=ttyS0 quiet panic=-1 mitigations=off",
		NULL,
	};
	struct lines l = { .status = -1 };
	double start = now();
	int fd, log;
	pid_t pid;
	bool done;

	snprintf(con, sizeof(con), "file:%s", vm_path(F_CONSOLE));
	snprintf(out, sizeof(out), "file:%s", vm_path(F_OUT));
	fd = open(vm_path(F_OUT), O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
	log = open(vm_path(F_QEMU), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	pid = fd < 0 || log < 0 ? -1 : fork();
	if (pid < 0) {
		pid = -errno;
		close(fd);
		close(log);
		return pid;
	}
	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(open("/dev/null", O_RDONLY), 0);
		dup2(log, 1);
		dup2(log, 2);
		execv(vm->qemu, (char **)argv);
		_exit(127);
	}
	close(log);
	do {
		struct timespec tick = { 0, 50 * 1000000 };

		done = waitpid(pid, NULL, WNOHANG) == pid;
		lines_read(&l, fd);	/* after waitpid: all of it at the end */
		if (!done && now() - start > timeout) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			close(fd);
			return -ETIMEDOUT;
		}
		if (!done)
			nanosleep(&tick, NULL);
	} while (!done);
	if (l.len)
		lines_flush(&l);
	close(fd);
	*secs = now() - start;
	return l.status >= 0 ? l.status : -EPIPE;
}

/* The last lines of a VM log, as TAP comments. */
static void tail_comment(const char *path)
{
	char *buf, *ring[TAIL_LINES], *line;
	size_t len;
	int n = 0;

	if (read_file(path, &buf, &len))
		return;
	for (line = strtok(buf, "\r\n"); line; line = strtok(NULL, "\r\n"))
		ring[n++ % TAIL_LINES] = line;
	for (int i = n > TAIL_LINES ? n - TAIL_LINES : 0; i < n; i++)
		printf("# %s\n", ring[i % TAIL_LINES]);
	free(buf);
}

void tcg_reexec(int argc, char **argv, const char *const *files)
{
	const char *root = getenv("FL_TCG_ROOT");
	const char *t = getenv("FL_TCG_TIMEOUT");
	const char *tmp = getenv("TMPDIR");
	int timeout = t && atoi(t) > 0 ? atoi(t) : DEFAULT_TIMEOUT;
	static struct vm vm;
	const char *why;
	ssize_t n;
	double secs;
	int ret;

	if (getenv("FL_IN_TCG") || tcg_kvm_usable())
		return;
	why = access("/dev/kvm", F_OK) ? "no /dev/kvm" :
	      forced() ? "FL_FORCE_TCG set" : "/dev/kvm unusable";
	if (!root || !*root)
		root = DEFAULT_ROOT;
	if (find_exe("qemu-system-x86_64", vm.qemu, sizeof(vm.qemu)))
		bail("%s, and no qemu-system-x86_64 to emulate one (apt-get install qemu-system-x86)",
		     why);
	if (find_exe("busybox", vm.busybox, sizeof(vm.busybox)))
		bail("%s, and no busybox for the TCG VM (apt-get install busybox-static)",
		     why);
	if (find_kernel(&vm, root))
		bail("%s, and no kernel with kvm-amd for the TCG VM in %s/boot or /boot (make tcg-kernel)",
		     why, root);
	n = readlink("/proc/self/exe", vm.exe, sizeof(vm.exe) - 1);
	if (n < 0 || !getcwd(vm.cwd, sizeof(vm.cwd)))
		bail("tcg_reexec: %s", strerror(errno));
	vm.exe[n] = '\0';

	snprintf(vm_dir, sizeof(vm_dir), "%s/fl-tcg-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(vm_dir)) {
		vm_dir[0] = '\0';
		bail("mkdtemp: %s", strerror(errno));
	}
	ret = build_initramfs(&vm, argc, argv, files);
	if (ret)
		bail("TCG VM initramfs: %s", strerror(-ret));
	printf("# %s: running inside qemu-system-x86_64 TCG, kernel %s\n",
	       why, vm.version);
	fflush(stdout);

	ret = run_vm(&vm, timeout, &secs);
	if (ret < 0) {
		tail_comment(vm_path(F_QEMU));
		tail_comment(vm_path(F_CONSOLE));
		if (ret == -ETIMEDOUT)
			bail("the TCG VM was killed after %d s (FL_TCG_TIMEOUT)",
			     timeout);
		if (ret == -EPIPE)
			bail("the TCG VM stopped without the test's exit status");
		bail("the TCG VM: %s", strerror(-ret));
	}
	printf("# TCG VM: %.1f s to boot and run\n", secs);
	vm_cleanup();
	exit(ret);
}
