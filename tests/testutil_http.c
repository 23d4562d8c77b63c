/*
 * testutil_http.c - a plain HTTP server over a folder for the tests of
 * remote shards (declared in testutil.h): `python3 -m http.server` on
 * 127.0.0.1 and a port that was free a moment before, in a child process
 * that dies with the test (PR_SET_PDEATHSIG) and is stopped by
 * tu_http_stop.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A port that was free a moment ago (the server binds it next). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int port_answers(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

void tu_http_stop(tu_http *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = -1;
    }
}

int tu_http_start(tu_http *s, const char *dir)
{
    s->pid = -1;
    s->port = free_port();
    if (s->port < 0)
        return -1;
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    pid_t parent = getpid();
    s->pid = fork();
    if (s->pid < 0)
        return -1;
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlives the test */
        if (getppid() != parent)
            _exit(1);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        execlp("python3", "python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", dir,
               port, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 400; i++) {
        if (port_answers(s->port))
            return 0;
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = -1;
            return -1;
        }
        struct timespec t = {0, 50 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    tu_http_stop(s);
    return -1;
}
