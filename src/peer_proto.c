/*
 * peer_proto.c - the socket helper both ends of the post-copy protocol
 * (peer_proto.h) share.
 */
#include <errno.h>
#include <sys/socket.h>

#include "peer_proto.h"

int peer_recv_all(int fd, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = recv(fd, (char *)buf + done, len - done, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (n == 0)
			return -ECONNRESET;
		done += (size_t)n;
	}
	return 0;
}
