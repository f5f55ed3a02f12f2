"""The locust part of bench/scale.py, in a process of its own: locust patches the standard library
for gevent when imported (sockets, threads), which would turn the bench's own threads (the test
model server, recall's passes) into greenlets; here nothing else runs.

`--users` simulated users, each on a chat of its own (one reply per chat at a time is the rule
across servers: two users on one chat would be refused by design), for `--seconds`, headless
through locust's library (Environment + LocalRunner). Each user, with waits of 1 to 3 s between,
reads its chat page three times, then sends a message and reads the streamed reply to its end, and
so on (each user starts at its own point of that round), each time through one of the servers
picked at random, so a reply written through one is read through the other. A page read after a
reply must show that reply, whichever server wrote it. A connection idle for CLIENT_KEEP_ALIVE_S is
not reused (see ChatUser._idle).

Prints one JSON line: the response times (ms) of the pages and of the message sends, and the
failures with a few of their reasons.

Run by bench/scale.py: python bench/scale_load.py --servers URL,URL --chats 1,2,3 --users 100 --seconds 60
"""

from gevent import monkey

monkey.patch_all()  # before anything else imports socket or ssl (locust would do it on import)

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402

import gevent  # noqa: E402
from geventhttpclient import URL  # noqa: E402
from locust import FastHttpUser, between, events, task  # noqa: E402
from locust.env import Environment  # noqa: E402

PAGE, SEND = "chat page", "send message"
STOP_TIMEOUT_S = 60
# uvicorn closes a connection idle for 5 s (its default, which `python -m app` keeps): this client
# stops reusing one a second before that.
CLIENT_KEEP_ALIVE_S = 4.0  # users finish the request they are in (a reply streaming) when the time is up
SERVERS: list[str] = []
CHATS: list[int] = []
_user_numbers = itertools.count()
times: dict[str, list[float]] = {PAGE: [], SEND: []}
failures: dict[str, Counter] = {PAGE: Counter(), SEND: Counter()}


@events.request.add_listener
def _record(request_type, name, response_time, response_length, exception=None, **_kw) -> None:
    if exception is not None:
        failures[name][str(exception)[:160]] += 1
    else:
        times[name].append(float(response_time))


def _done_reply(body: str) -> str | None:
    """The reply's text from the generate stream's last event, when it is `done`."""
    event, data = "message", ""
    for block in body.strip().split("\n\n"):
        event, data = "message", ""
        for line in block.splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
    if event != "done" or not data:
        return None
    return str(json.loads(data).get("content", ""))


class ChatUser(FastHttpUser):
    host = "http://127.0.0.1"  # every request names its server in full
    wait_time = between(1, 3)

    def on_start(self) -> None:
        number = next(_user_numbers)
        self.chat_id = CHATS[number % len(CHATS)]
        self.token: str | None = None  # the last message's word, which the next page must show
        self.last_used: dict[str, float] = {}  # when each server last answered this user
        # Three pages, then a message, in turn; users start at different points of the round, so a
        # quarter of them send first (and a short run measures both).
        self.steps = itertools.islice(itertools.cycle((PAGE, PAGE, PAGE, SEND)), number % 4, None)

    @task
    def next_step(self) -> None:
        if next(self.steps) == SEND:
            self.send_message()
        else:
            self.read_chat_page()

    def _idle(self, server: str) -> str:
        """How long this user's connection to `server` had been idle (for a failure's reason); one
        idle for nearly the server's keep-alive timeout is closed first, as a client that keeps its
        idle connections shorter than the server's must (or the server may close it just as a request
        goes out: a browser retries then, locust counts a failure)."""
        last = self.last_used.get(server)
        if last is None:
            return "new connection"
        idle = time.monotonic() - last
        if idle >= CLIENT_KEEP_ALIVE_S:
            url = URL(server)
            client = self.client.client.clientpool.clients.pop((url.host, url.port), None)
            if client is not None:
                client.close()
            return f"new connection after {idle:.1f} s idle"
        return f"connection idle {idle:.1f} s"

    def read_chat_page(self) -> None:
        server = random.choice(SERVERS)
        idle = self._idle(server)
        with self.client.get(f"{server}/chats/{self.chat_id}", name=PAGE, catch_response=True) as answer:
            if answer.status_code != 200:
                answer.failure(f"HTTP {answer.status_code} {answer.error or ''} ({idle})")
            elif self.token and self.token not in (answer.text or ""):
                answer.failure("the page does not show the last message sent")
        self.last_used[server] = time.monotonic()

    def send_message(self) -> None:
        server = random.choice(SERVERS)
        idle = self._idle(server)
        token = f"lantern{random.randrange(10**9)}"
        with self.client.post(
            f"{server}/api/chats/{self.chat_id}/generate",
            json={"action": "send", "content": f"Tell me again about the {token} by the harbour."},
            name=SEND,
            catch_response=True,
        ) as answer:
            if answer.status_code != 200:
                answer.failure(
                    f"HTTP {answer.status_code} {answer.error or ''} ({idle}): {(answer.text or '')[:120]}"
                )
            elif _done_reply(answer.text or "") is None:
                answer.failure(f"the reply did not end with `done`: {(answer.text or '')[-160:]}")
            else:
                self.token = token
        self.last_used[server] = time.monotonic()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", required=True, help="the servers' URLs, comma-separated")
    parser.add_argument("--chats", required=True, help="chat ids, comma-separated (one per user)")
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    SERVERS.extend(u.rstrip("/") for u in args.servers.split(","))
    CHATS.extend(int(c) for c in args.chats.split(","))
    env = Environment(user_classes=[ChatUser], events=events, stop_timeout=STOP_TIMEOUT_S)
    runner = env.create_local_runner()
    # All users within the first 5 s (at once, they would all send their first request together).
    started = time.monotonic()
    runner.start(args.users, spawn_rate=max(1.0, args.users / 5))
    gevent.sleep(args.seconds)
    runner.stop()  # waits for the users to end the request they are in (at most STOP_TIMEOUT_S)
    runner.quit()
    ran_s = time.monotonic() - started
    print(
        json.dumps(
            {
                "seconds": ran_s,
                "times": times,
                "failures": {name: sum(c.values()) for name, c in failures.items()},
                "reasons": {name: c.most_common(6) for name, c in failures.items()},
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
