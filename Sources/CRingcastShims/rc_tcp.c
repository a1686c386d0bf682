// Apart from rc_shims.c: the kernel's struct tcp_info (linux/tcp.h) carries tcpi_bytes_acked,
// which glibc's netinet/tcp.h lacks, and the two headers cannot be included together.
#include <linux/tcp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

int64_t rc_bytes_acked(int descriptor)
{
    struct tcp_info info;
    socklen_t length = sizeof info;
    if (getsockopt(descriptor, 6 /* IPPROTO_TCP */, TCP_INFO, &info, &length) != 0)
        return -1;
    if (length < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof info.tcpi_bytes_acked)
        return -1;
    return (int64_t)info.tcpi_bytes_acked;
}
