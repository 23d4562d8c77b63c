"""A small fault-injecting HTTP proxy for the remote-shard tests.

One request per connection: it reads the request head, logs "METHOD PATH
FAULT" to --log, and with probability --rate injects one of --faults:
  drop      close the connection without an answer
  503       answer 503 Service Unavailable
  stall     say nothing for --stall seconds, then close (past the client's timeout)
  truncate  forward, then cut the response body in half and close
  trickle   forward, then send the response 2 bytes a second, for --stall
            seconds at most (a server too slow to be waited for)
A request whose "METHOD PATH" matches --fail-match is answered 503 at once,
every time (an outage of that object). A request whose "METHOD PATH"
matches --hold-match waits --hold seconds
before it goes on (a slow round trip, to see what runs beside it); with
--bps, each answer is sent at that many bytes per second at most (a link,
or an object store's per-connection rate); with
--times, each request's arrival is also logged there as "SECONDS METHOD
PATH" (time.monotonic()).
Otherwise the request goes to --upstream unchanged (the Host header too, so
SigV4 signatures stay valid) and the answer comes back as it is. The choice
is drawn from a seeded generator, per request in arrival order.
"""

import argparse
import random
import re
import socket
import socketserver
import threading
import time


def read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    return head, rest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--rate", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stall", type=float, default=3.0)
    ap.add_argument("--faults", default="drop,503,stall,truncate")
    ap.add_argument("--hold", type=float, default=0.0)
    ap.add_argument("--hold-match", default="")
    ap.add_argument("--times", default="")
    ap.add_argument("--bps", type=float, default=0.0)
    ap.add_argument("--fail-match", default="")
    a = ap.parse_args()
    host, port = a.upstream.split("//", 1)[1].split(":")
    upstream = (host, int(port))
    faults = a.faults.split(",")
    rng = random.Random(a.seed)
    lock = threading.Lock()  # protects rng and the log
    log = open(a.log, "a", buffering=1)
    times = open(a.times, "a", buffering=1) if a.times else None

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            c = self.request
            head, rest = read_head(c)
            if head is None:
                return
            lines = head.split(b"\r\n")
            method, path = lines[0].split(b" ")[:2]
            # one request per connection: ask the upstream to close after it
            kept = [ln for ln in lines[1:] if not ln.lower().startswith(b"connection:")]
            req = b"\r\n".join([lines[0]] + kept + [b"Connection: close"]) + b"\r\n\r\n" + rest
            with lock:
                fault = rng.choice(faults) if rng.random() < a.rate else "none"
                if a.fail_match and re.search(a.fail_match, "%s %s" % (method.decode(),
                                                                       path.decode())):
                    fault = "503"
                log.write("%s %s %s\n" % (method.decode(), path.decode(), fault))
                if times:
                    times.write("%.6f %s %s\n" % (time.monotonic(), method.decode(),
                                                   path.decode()))
            if a.hold_match and re.search(a.hold_match, "%s %s" % (method.decode(),
                                                                  path.decode())):
                time.sleep(a.hold)
            if fault == "drop":
                return
            if fault == "503":
                c.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                          b"Connection: close\r\n\r\n")
                return
            if fault == "stall":
                time.sleep(a.stall)
                return
            u = socket.create_connection(upstream)
            try:
                u.sendall(req)
                resp = b""
                while True:
                    chunk = u.recv(1 << 20)
                    if not chunk:
                        break
                    resp += chunk
            finally:
                u.close()
            if fault == "truncate" and b"\r\n\r\n" in resp:
                h, body = resp.split(b"\r\n\r\n", 1)
                resp = h + b"\r\n\r\n" + body[:len(body) // 2]
            if fault == "trickle":
                end = time.monotonic() + a.stall
                for i in range(len(resp)):
                    if time.monotonic() >= end:
                        return
                    try:
                        c.sendall(resp[i:i + 1])
                    except OSError:
                        return
                    time.sleep(0.5)
                return
            if a.bps <= 0:
                c.sendall(resp)
                return
            t0, step = time.monotonic(), 1 << 16
            for at in range(0, len(resp), step):
                c.sendall(resp[at:at + step])
                ahead = t0 + (at + step) / a.bps - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)

    class Server(socketserver.ThreadingTCPServer):
        allow_reuse_address = True
        daemon_threads = True

    with Server(("127.0.0.1", a.port), Handler) as srv:
        srv.serve_forever()


if __name__ == "__main__":
    main()
