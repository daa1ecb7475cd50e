"""The other tasks of gen_session.py --kind: database recovery, a code-editing agent, a support desk.

Each is a Session (same turns, same length control, same pure function of the seed) with its own
tools, system prompt, world drawn from the seed (hosts, ports, paths, ticket and order numbers:
the literals a wrong copy would mangle) and episodes.
"""

import json

from gen_session import Session, tool

S = {"type": "string"}


class World:
    """Whatever a task's episodes read and change; copied with the session when an episode is undone."""


class Task(Session):
    tools = []

    def __init__(self, seed, target_chars):
        import random
        self.rng = random.Random(seed)
        self.lab = World()
        self.make_world(self.lab, self.rng)
        self.target_chars = target_chars
        self.messages = [{"role": "system", "content": self.system_prompt()}]
        self.n_calls = 0
        self.port_checks = 0


class DbRecovery(Task):
    tools = [tool("run_shell", "Run a shell command on a database host and return its output.",
                  {"host": S, "command": S}, ["host", "command"]),
             tool("psql", "Run one SQL statement with psql on a host and port.",
                  {"host": S, "port": {"type": "integer"}, "sql": S}, ["host", "port", "sql"])]

    def make_world(self, w, rng):
        w.primary, w.replica = "pg-%s01" % rng.choice(["ams", "fra", "lon"]), "pg-%s02" % rng.choice(["ams", "fra", "lon"])
        w.port = rng.choice([5432, 5433, 6432])
        w.lsn = rng.randrange(0x10000000, 0x7fffffff)
        w.tables = rng.sample(["orders", "invoices", "customers", "shipments", "payments", "refunds", "audit_log"], 5)

    def system_prompt(self):
        w = self.lab
        return ("You are DBA-bot, recovering PostgreSQL 16 clusters. Primary %s, streaming replica %s, both on port %d.\n"
                "Rules: never drop or truncate; read WAL positions before promoting; copy LSNs, ports and paths exactly."
                % (w.primary, w.replica, w.port))

    def ep_lag(self):
        w, rng = self.lab, self.rng
        self.user("Is %s keeping up with the primary?" % w.replica)
        w.lsn += rng.randrange(1000, 90000)
        lag = rng.randrange(0, 4000)
        self.turn(None, [("psql", {"host": w.primary, "port": w.port, "sql": "SELECT client_addr, state, sent_lsn, replay_lsn FROM pg_stat_replication;"},
                          " client_addr  |   state   |  sent_lsn   | replay_lsn\n 10.40.2.%d | streaming | 0/%X | 0/%X\n(1 row)"
                          % (rng.randrange(2, 250), w.lsn, w.lsn - lag))])
        self.answer("%s streams from %s and replays 0x%X bytes behind (sent 0/%X)." % (w.replica, w.primary, lag, w.lsn))

    def ep_counts(self):
        w, rng = self.lab, self.rng
        t = rng.choice(w.tables)
        n = rng.randrange(10000, 9000000)
        self.user("How many rows does %s hold on the replica?" % t)
        self.turn("Counting on %s:%d." % (w.replica, w.port),
                  [("psql", {"host": w.replica, "port": w.port, "sql": "SELECT count(*) FROM %s;" % t}, "  count\n---------\n %d\n(1 row)" % n)])
        self.answer("%s holds %d rows on %s." % (t, n, w.replica))

    def ep_wal(self):
        w, rng = self.lab, self.rng
        self.user("Check the WAL archive on %s, the disk is filling up." % w.primary)
        files = ["0000000%d%016X" % (rng.randrange(1, 4), w.lsn // 16 + i) for i in range(rng.randrange(3, 6))]
        self.turn(None, [("run_shell", {"host": w.primary, "command": "ls -la /var/lib/postgresql/16/main/pg_wal | tail -n %d" % len(files)},
                          "\n".join("-rw------- 1 postgres postgres 16777216 Mar %2d 0%d:%02d %s" % (rng.randrange(1, 28), rng.randrange(0, 9), rng.randrange(60), f) for f in files))])
        self.turn(None, [("run_shell", {"host": w.primary, "command": "df -h /var/lib/postgresql"},
                          "Filesystem      Size  Used Avail Use%% Mounted on\n/dev/nvme1n1p1  500G  %dG  %dG  %d%% /var/lib/postgresql" % (430, 70, 86))])
        self.answer("pg_wal holds %d segments up to %s and the volume is at 86%%; archive_command should be checked before it fills." % (len(files), files[-1]))

    def episodes(self):
        return [self.ep_lag, self.ep_counts, self.ep_wal]


class CodeEdit(Task):
    tools = [tool("read_file", "Read a file of the repository.", {"path": S}, ["path"]),
             tool("edit_file", "Replace an exact string in a file.", {"path": S, "old": S, "new": S}, ["path", "old", "new"]),
             tool("run_tests", "Run the test suite, or one test by name.", {"filter": S}, [])]

    def make_world(self, w, rng):
        w.module = rng.choice(["billing", "inventory", "routing", "auth"])
        w.funcs = rng.sample(["parse_amount", "round_cents", "apply_discount", "next_retry", "token_expiry", "split_batch"], 4)
        w.limit = rng.choice([30, 60, 120, 300])

    def system_prompt(self):
        w = self.lab
        return ("You are a code-editing agent in the %s service (Python 3.12). Read a file before editing it, make the "
                "smallest change, run the tests after each edit. Quote names, paths and numbers exactly." % w.module)

    def ep_fix(self):
        w, rng = self.lab, self.rng
        f = rng.choice(w.funcs)
        path = "src/%s/%s.py" % (w.module, f)
        line = rng.randrange(12, 180)
        self.user("test_%s fails since yesterday; please fix %s." % (f, f))
        body = "def %s(value, limit=%d):\n    if value > limit:\n        return limit\n    return value - 1\n" % (f, w.limit)
        self.turn(None, [("read_file", {"path": path}, body)])
        self.turn("Line %d subtracts one from every value below the limit; the spec says it returns the value." % line,
                  [("edit_file", {"path": path, "old": "    return value - 1\n", "new": "    return value\n"}, "edited %s (1 replacement)" % path)])
        self.turn(None, [("run_tests", {"filter": "test_%s" % f}, "tests/test_%s.py::test_%s PASSED\n1 passed in 0.%02ds" % (f, f, rng.randrange(10, 99)))])
        self.answer("Fixed %s in %s: it returned value - 1 below the limit of %d. test_%s passes." % (f, path, w.limit, f))

    def ep_limit(self):
        w, rng = self.lab, self.rng
        new = w.limit * 2
        path = "src/%s/config.py" % w.module
        self.user("Raise the timeout limit from %d to %d seconds." % (w.limit, new))
        self.turn(None, [("read_file", {"path": path}, "TIMEOUT_S = %d\nRETRIES = %d\n" % (w.limit, rng.randrange(2, 6)))])
        self.turn(None, [("edit_file", {"path": path, "old": "TIMEOUT_S = %d" % w.limit, "new": "TIMEOUT_S = %d" % new}, "edited %s (1 replacement)" % path)])
        w.limit = new
        self.turn(None, [("run_tests", {}, "%d passed in %d.%02ds" % (rng.randrange(80, 300), rng.randrange(2, 9), rng.randrange(100)))])
        self.answer("TIMEOUT_S is now %d in %s and the suite passes." % (new, path))

    def episodes(self):
        return [self.ep_fix, self.ep_limit]


class Support(Task):
    tools = [tool("lookup_order", "Find an order by number.", {"order_id": S}, ["order_id"]),
             tool("issue_refund", "Refund an amount on an order.", {"order_id": S, "amount": {"type": "number"}, "reason": S},
                  ["order_id", "amount", "reason"]),
             tool("send_email", "Email a customer.", {"to": S, "subject": S, "body": S}, ["to", "subject", "body"])]

    def make_world(self, w, rng):
        w.shop = rng.choice(["Northwind Outfitters", "Bluebird Books", "Kettle & Co"])
        w.names = rng.sample(["Ana Souza", "Jonas Berg", "Mei Tanaka", "Omar Haddad", "Lena Novak", "Raj Patel"], 5)

    def system_prompt(self):
        return ("You are the support agent of %s. Look an order up before acting on it; refunds up to 150.00 EUR need no "
                "approval. Quote order numbers, amounts and addresses exactly." % self.lab.shop)

    def ep_refund(self):
        w, rng = self.lab, self.rng
        name = rng.choice(w.names)
        order = "NW-%d-%04d" % (rng.randrange(2024, 2027), rng.randrange(10000))
        amount = rng.randrange(1500, 14900) / 100
        email = name.lower().replace(" ", ".") + "@example.com"
        self.user("Hi, this is %s. Order %s arrived damaged, I would like my money back." % (name, order))
        self.turn("Looking up %s." % order, [("lookup_order", {"order_id": order}, json.dumps(
            {"order_id": order, "customer": name, "email": email, "total_eur": amount, "status": "delivered",
             "items": [{"sku": "SKU-%05d" % rng.randrange(100000), "qty": 1}]}))])
        self.turn(None, [("issue_refund", {"order_id": order, "amount": amount, "reason": "damaged in transit"},
                          json.dumps({"refund_id": "RF-%06d" % rng.randrange(10 ** 6), "status": "approved"}))])
        self.turn(None, [("send_email", {"to": email, "subject": "Your refund for %s" % order,
                                         "body": "Dear %s, we refunded %.2f EUR for order %s." % (name, amount, order)}, "queued")])
        self.answer("I refunded %.2f EUR for %s and emailed %s." % (amount, order, email))

    def ep_status(self):
        w, rng = self.lab, self.rng
        order = "NW-%d-%04d" % (rng.randrange(2024, 2027), rng.randrange(10000))
        self.user("Where is my order %s?" % order)
        track = "1Z%08X" % rng.randrange(16 ** 8)
        self.turn(None, [("lookup_order", {"order_id": order}, json.dumps(
            {"order_id": order, "status": "shipped", "carrier": "UPS", "tracking": track, "eta": "2026-03-%02d" % rng.randrange(1, 29)}))])
        self.answer("Order %s shipped with UPS, tracking number %s." % (order, track))

    def episodes(self):
        return [self.ep_refund, self.ep_status]


KINDS = {"dbrecovery": DbRecovery, "codeedit": CodeEdit, "support": Support}
