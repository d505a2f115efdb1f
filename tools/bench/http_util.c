// SPDX-License-Identifier: Apache-2.0
/*
 * http_util.c - the nginx helpers declared in http_util.h.
 */
#define _GNU_SOURCE
#include "bench.h"
#include "http_util.h"

const char *nginx_binary(void)
{
	static const char *const paths[] = { "/usr/sbin/nginx",
					     "/usr/bin/nginx" };

	for (size_t i = 0; i < sizeof(paths) / sizeof(*paths); i++)
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	return NULL;
}

int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

int port_open(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int yes = fd >= 0 &&
		  connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

	if (fd >= 0)
		close(fd);
	return yes;
}

int nginx_setup(struct nginx *n)
{
	char path[256];
	FILE *f;

	snprintf(n->dir, sizeof(n->dir), "/tmp/fl-nginx-%d", getpid());
	snprintf(n->www, sizeof(n->www), "%s/www", n->dir);
	snprintf(n->log, sizeof(n->log), "%s/access.log", n->dir);
	mkdir(n->dir, 0755);
	bench_path_add(n->dir);
	mkdir(n->www, 0755);
	snprintf(path, sizeof(path), "%s/tmp", n->dir);
	mkdir(path, 0755);
	n->port = free_port();
	n->pid = -1;
	if (n->port < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/nginx.conf", n->dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"daemon off;\n"
		"master_process off;\n"
		"worker_processes 1;\n"
		"pid %1$s/nginx.pid;\n"
		"error_log %1$s/error.log;\n"
		"events { worker_connections 512; }\n"
		"http {\n"
		"  log_format fl '$request_uri $status $http_range $body_bytes_sent';\n"
		"  access_log %1$s/access.log fl;\n"
		"  client_body_temp_path %1$s/tmp/body;\n"
		"  proxy_temp_path %1$s/tmp/proxy;\n"
		"  fastcgi_temp_path %1$s/tmp/fastcgi;\n"
		"  uwsgi_temp_path %1$s/tmp/uwsgi;\n"
		"  scgi_temp_path %1$s/tmp/scgi;\n"
		"  keepalive_requests 100000;\n"
		"  sendfile on;\n"
		"  server {\n"
		"    listen 127.0.0.1:%2$d;\n"
		"    root %1$s/www;\n"
		"    location /slow/ { limit_rate 256k; }\n"
		"    location /noetag/ { etag off; }\n"
		"  }\n"
		"}\n", n->dir, n->port);
	return fclose(f) ? -1 : 0;
}

int nginx_start(struct nginx *n)
{
	char conf[256];
	const char *bin = nginx_binary();

	if (!bin)
		return -1;
	snprintf(conf, sizeof(conf), "%s/nginx.conf", n->dir);
	n->pid = fork();
	if (n->pid < 0)
		return -1;
	if (n->pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execl(bin, "nginx", "-p", n->dir, "-e", "stderr", "-c", conf,
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 400; i++) {
		int st;

		if (port_open(n->port))
			return 0;
		if (waitpid(n->pid, &st, WNOHANG) == n->pid) {
			n->pid = -1;
			return -1;
		}
		usleep(5000);
	}
	return -1;
}

void nginx_kill(struct nginx *n)
{
	if (n->pid > 0) {
		kill(n->pid, SIGKILL);
		waitpid(n->pid, NULL, 0);
		n->pid = -1;
	}
}

long nginx_requests(const struct nginx *n)
{
	FILE *f = fopen(n->log, "r");
	long lines = 0;
	int c;

	if (!f)
		return 0;
	while ((c = getc(f)) != EOF)
		lines += c == '\n';
	fclose(f);
	return lines;
}

long nginx_requests_matching(const struct nginx *n, long from,
					   const char *s)
{
	FILE *f = fopen(n->log, "r");
	char line[1024];
	long i = 0, hits = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (i++ >= from && strstr(line, s))
			hits++;
	fclose(f);
	return hits;
}

void nginx_cleanup(struct nginx *n)
{
	char cmd[300];

	nginx_kill(n);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", n->dir);
	if (system(cmd)) {
		/* leave it for inspection */
	}
	bench_path_forget(n->dir);
}
