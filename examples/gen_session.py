#!/usr/bin/env python3
"""Generates a network-automation agent session in the OpenAI chat request shape.

    gen_session.py --seed N --target-tokens T [--chars-per-token 2.5] -o FILE

The session is a pure function of the arguments (Python standard library only, no clock, no
environment): a lab network is drawn from the seed, then episodes are added (a user request, the
agent's tool calls, realistic device output, the agent's answer) as long as the estimated length
stays within the target. The estimate is the approximate rendered length in characters divided by
--chars-per-token; the default 2.5 is what SmolLM2's and Gemma 3's tokenizers measure on this
kind of text (device output is dense in numbers). examples/README.md lists measured counts.
"""

import argparse
import copy
import json
import random
import sys

DOMAIN = "example.net"


def tool(name, description, properties, required):
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


S = {"type": "string"}
TOOLS = [
    tool("run_command", "Run a read-only show command on a network device over SSH and return its output.",
         {"device": {"type": "string", "description": "Device hostname, e.g. lab-core01"},
          "command": {"type": "string", "description": "The exact CLI command, e.g. show arp"}}, ["device", "command"]),
    tool("apply_config", "Enter configuration mode on a device, apply the lines in order, save, and return the session output.",
         {"device": S, "lines": {"type": "array", "items": S, "description": "Configuration lines"},
          "comment": {"type": "string", "description": "Change record for the audit log"}}, ["device", "lines", "comment"]),
    tool("ping", "Ping a target from a device, optionally from a source interface.",
         {"device": S, "target": S, "count": {"type": "integer", "default": 5},
          "source": {"type": "string", "description": "Source interface"}}, ["device", "target"]),
    tool("check_port", "Open a TCP connection from the jump host lab-jump01 to host:port and report the result.",
         {"host": S, "port": {"type": "integer"}}, ["host", "port"]),
]

SERVICES = [("db", 5432, "PostgreSQL"), ("app", 8080, "app server"), ("web", 443, "nginx"),
            ("cache", 6379, "Redis"), ("mq", 5672, "RabbitMQ"), ("mon", 9090, "Prometheus"),
            ("ldap", 636, "LDAPS"), ("git", 22, "Git over SSH"), ("ntp", 123, "NTP"), ("log", 514, "syslog")]


class Lab:
    """The network: one core router with VLAN subinterfaces, access switches, hosts."""

    def __init__(self, rng):
        self.rng = rng
        self.site = rng.choice(["ams", "fra", "lon", "par", "nyc", "sfo"])
        self.octet2 = rng.randrange(16, 31)
        self.vlans = sorted(rng.sample(range(200, 260), 4))
        self.core = "lab-core01"
        self.switches = ["lab-sw%02d" % i for i in range(1, rng.randrange(3, 5))]
        self.core_mac = self.mac()
        self.hosts = []
        used = set()
        for i, (kind, port, svc) in enumerate(SERVICES):
            for n in range(1, rng.randrange(2, 4)):
                vlan = self.vlans[(i + n) % len(self.vlans)]
                sw = rng.choice(self.switches)
                while True:
                    swport = "Gi1/0/%d" % rng.randrange(1, 48)
                    if (sw, swport) not in used:
                        used.add((sw, swport))
                        break
                self.hosts.append({
                    "name": "%s%02d" % (kind, n), "service": svc, "port": port, "vlan": vlan,
                    "ip": "10.%d.%d.%d" % (self.octet2, vlan, rng.randrange(10, 240)),
                    "mac": self.mac(), "switch": sw, "swport": swport})
        self.acls = {}

    def mac(self):
        b = [self.rng.randrange(256) for _ in range(6)]
        b[0] &= 0xFE
        return "%02x%02x.%02x%02x.%02x%02x" % tuple(b)

    def fqdn(self, name):
        return "%s.%s.%s" % (name, self.site, DOMAIN)

    def gw(self, vlan):
        return "10.%d.%d.1" % (self.octet2, vlan)

    def subif(self, vlan):
        return "GigabitEthernet0/0/1.%d" % vlan

    def long_port(self, swport):
        return swport.replace("Gi", "GigabitEthernet")


class Session:
    tools = TOOLS

    def __init__(self, seed, target_chars):
        self.rng = random.Random(seed)
        self.lab = Lab(self.rng)
        self.target_chars = target_chars
        self.messages = [{"role": "system", "content": self.system_prompt()}]
        self.n_calls = 0
        self.port_checks = 0

    def system_prompt(self):
        lab = self.lab
        lines = [
            "You are NetOps, the automation agent for the %s lab network (%s.%s)." % (lab.site.upper(), lab.site, DOMAIN),
            "You work through tools: run_command for show commands, apply_config for changes, ping and check_port.",
            "Rules:",
            "- Read before you write: look at the current configuration before changing it.",
            "- Copy addresses, MACs, interface names and ports exactly from device output; never guess them.",
            "- Every change needs a comment with the ticket number; never reload a device.",
            "- After a change, verify it with a show command and report what changed.",
            "",
            "Inventory:",
            "- %s (%s): ISR4451, uplinks GigabitEthernet0/0/0 (WAN) and GigabitEthernet0/0/1 (trunk to the switches)"
            % (lab.core, lab.fqdn(lab.core)),
        ]
        for sw in lab.switches:
            lines.append("- %s (%s): Catalyst 9300-48P, uplink TenGigabitEthernet1/1/1 in Port-channel1" % (sw, lab.fqdn(sw)))
        lines.append("- VLANs: " + ", ".join("%d (10.%d.%d.0/24, gateway %s on %s)"
                                              % (v, lab.octet2, v, lab.gw(v), lab.subif(v)) for v in lab.vlans))
        return "\n".join(lines)

    def chars(self):
        """Approximate length of the rendered session: contents, call JSON, per-message framing and
        the tool list that templates without tool support put into the system message."""
        n = len(json.dumps(self.tools)) + 700
        for m in self.messages:
            n += len(m.get("content") or "") + 25
            for c in m.get("tool_calls", []):
                n += len(c["function"]["arguments"]) + len(c["function"]["name"]) + 40
        return n

    def call(self, name, args):
        self.n_calls += 1
        return {"id": "call_%04d%s" % (self.n_calls, "".join(self.rng.choice("abcdef0123456789") for _ in range(6))),
                "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}

    def turn(self, text, calls_and_results):
        """An assistant message with tool calls (text may be None), then one tool message per call."""
        calls = [self.call(n, a) for n, a, _ in calls_and_results]
        self.messages.append({"role": "assistant", "content": text, "tool_calls": calls})
        for c, (_, _, result) in zip(calls, calls_and_results):
            self.messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})

    def user(self, text):
        self.messages.append({"role": "user", "content": text})

    def answer(self, text):
        self.messages.append({"role": "assistant", "content": text})

    def show_arp(self, hosts):
        lab, rng = self.lab, self.rng
        rows = ["Protocol  Address          Age (min)  Hardware Addr   Type   Interface"]
        for v in lab.vlans:
            rows.append("Internet  %-16s        -   %s  ARPA   %s" % (lab.gw(v), lab.core_mac, lab.subif(v)))
        for h in hosts:
            rows.append("Internet  %-16s %9d   %s  ARPA   %s" % (h["ip"], rng.randrange(0, 240), h["mac"], lab.subif(h["vlan"])))
        return "\n".join(rows)

    def show_mac(self, h):
        return ("          Mac Address Table\n-------------------------------------------\n\n"
                "Vlan    Mac Address       Type        Ports\n----    -----------       --------    -----\n"
                "%4d    %s    DYNAMIC     %s\nTotal Mac Addresses for this criterion: 1" % (h["vlan"], h["mac"], h["swport"]))

    def show_run_int(self, h):
        text = "\n".join(["interface %s" % self.lab.long_port(h["swport"]), " description %s eth0" % h["name"],
                          " switchport access vlan %d" % h["vlan"], " switchport mode access", " spanning-tree portfast",
                          " spanning-tree bpduguard enable", "end"])
        return "Building configuration...\n\nCurrent configuration : %d bytes\n!\n%s" % (len(text) + 4, text)

    def show_int_desc(self, sw):
        rows = ["Interface                      Status         Protocol Description"]
        ports = {h["swport"]: h for h in self.lab.hosts if h["switch"] == sw}
        for i in range(1, 49):
            p = "Gi1/0/%d" % i
            if p in ports:
                rows.append("%-30s %-14s %-8s %s" % (p, "up", "up", "%s eth0" % ports[p]["name"]))
            elif self.rng.random() < 0.25:
                rows.append(("%-30s %-14s %-8s" % (p, "admin down", "down")).rstrip())
        rows.append("%-30s %-14s %-8s %s" % ("Te1/1/1", "up", "up", "uplink %s Gi0/0/1" % self.lab.core))
        rows.append("%-30s %-14s %-8s %s" % ("Po1", "up", "up", "to %s" % self.lab.core))
        for v in self.lab.vlans:
            rows.append("%-30s %-14s %-8s %s" % ("Vl%d" % v, "up", "up", "mgmt vlan %d" % v))
        return "\n".join(rows)

    def show_int_counters(self, sw):
        rng = self.rng
        crc = rng.choice([0, 0, rng.randrange(1, 900)])
        return ("TenGigabitEthernet1/1/1 is up, line protocol is up (connected)\n"
                "  Hardware is Ten Gigabit Ethernet Port, address is %s (bia %s)\n"
                "  Description: uplink %s Gi0/0/1\n  MTU 9198 bytes, BW 10000000 Kbit/sec, DLY 10 usec,\n"
                "  Full-duplex, 10Gb/s, link type is auto, media type is SFP-10GBase-SR\n"
                "  5 minute input rate %d bits/sec, %d packets/sec\n  5 minute output rate %d bits/sec, %d packets/sec\n"
                "     %d packets input, %d bytes, 0 no buffer\n     %d input errors, %d CRC, 0 frame, 0 overrun, 0 ignored\n"
                "     %d packets output, %d bytes, 0 underruns\n     0 output errors, 0 collisions, 1 interface resets"
                % (self.lab.mac(), self.lab.mac(), self.lab.core, rng.randrange(10**6, 10**9), rng.randrange(100, 90000),
                   rng.randrange(10**6, 10**9), rng.randrange(100, 90000), rng.randrange(10**8, 10**10),
                   rng.randrange(10**10, 10**12), crc, crc, rng.randrange(10**8, 10**10), rng.randrange(10**10, 10**12))), crc

    def ep_locate(self):
        h = self.rng.choice(self.lab.hosts)
        lab = self.lab
        self.user(self.rng.choice([
            "Where is %s (%s) plugged in? I need the switch port." % (h["name"], h["ip"]),
            "Can you find the access port for %s? Its address is %s." % (lab.fqdn(h["name"]), h["ip"]),
            "Which switch port does %s hang off?" % h["ip"]]))
        same = [x for x in lab.hosts if x["vlan"] == h["vlan"]]
        self.turn("I'll start with the ARP table on %s to get the MAC address of %s." % (lab.core, h["ip"]),
                  [("run_command", {"device": lab.core, "command": "show arp vlan %d" % h["vlan"]}, self.show_arp(same))])
        self.turn("%s is at %s on %s. Now the MAC table on %s." % (h["ip"], h["mac"], lab.subif(h["vlan"]), h["switch"]),
                  [("run_command", {"device": h["switch"], "command": "show mac address-table address %s" % h["mac"]},
                    self.show_mac(h))])
        self.turn(None, [("run_command", {"device": h["switch"], "command": "show running-config interface %s"
                                          % lab.long_port(h["swport"])}, self.show_run_int(h))])
        self.answer("%s (%s, MAC %s) is connected to %s port %s (%s), access VLAN %d. Its gateway is %s on %s."
                    % (h["name"], h["ip"], h["mac"], h["switch"], h["swport"], lab.long_port(h["swport"]), h["vlan"],
                       lab.gw(h["vlan"]), lab.subif(h["vlan"])))

    def acl(self, vlan):
        """The inbound ACL of a VLAN's subinterface: a few permits, then a logged deny."""
        lab, rng = self.lab, self.rng
        if vlan not in lab.acls:
            others = rng.sample([h for h in lab.hosts if h["vlan"] != vlan], 2)
            lab.acls[vlan] = [(10 * (i + 1), "permit tcp 10.%d.%d.0 0.0.0.255 host %s eq %d" % (lab.octet2, vlan, o["ip"], o["port"]))
                              for i, o in enumerate(others)]
        return lab.acls[vlan]

    def show_acl(self, vlan):
        rows = ["Extended IP access list VLAN%d-IN" % vlan]
        for seq, rule in self.acl(vlan):
            rows.append("    %d %s (%d matches)" % (seq, rule, self.rng.randrange(10, 99999)))
        rows.append("    1000 deny   ip any any log (%d matches)" % self.rng.randrange(1, 500))
        return "\n".join(rows)

    def ep_port_check(self):
        lab, rng = self.lab, self.rng
        # The first port check is always PostgreSQL (5432): the classic copied-literal case.
        ports = (5432, 6379, 5672, 636, 9090) if self.port_checks else (5432,)
        self.port_checks += 1
        db = rng.choice([h for h in lab.hosts if h["port"] in ports])
        app = rng.choice([h for h in lab.hosts if h["vlan"] != db["vlan"]])
        self.user(rng.choice([
            "%s says it cannot reach %s on port %d (%s). Please check." % (app["name"], lab.fqdn(db["name"]), db["port"], db["service"]),
            "The %s on %s is unreachable from %s (%s), port %d times out. Can you fix it?" % (db["service"], db["name"], app["name"], app["ip"], db["port"]),
            "Connections from %s to %s:%d fail since this morning." % (app["ip"], db["ip"], db["port"])]))
        acl = "VLAN%d-IN" % app["vlan"]
        wildcard = "10.%d.%d.0 0.0.0.255" % (lab.octet2, app["vlan"])
        line_rule = "permit tcp %s host %s eq %d" % (wildcard, db["ip"], db["port"])
        permitted = any(r == line_rule for _, r in self.acl(app["vlan"]))
        self.turn("First a TCP check to %s:%d from the jump host." % (db["ip"], db["port"]),
                  [("check_port", {"host": db["ip"], "port": db["port"]},
                    "tcp %s:%d from lab-jump01: %s" % (db["ip"], db["port"], "open (connect time %.2f ms)" % rng.uniform(0.2, 2.5)
                                                        if permitted else "connection timed out after 3.0 s"))])
        if permitted:
            self.answer("%s:%d answers from the jump host, and %s already permits it. The network path is fine; "
                        "please check the %s service and its pg_hba/bind settings on %s." % (db["ip"], db["port"], acl, db["service"], db["name"]))
            return
        self.turn("The connection times out. Let me look at the inbound ACL on %s." % lab.subif(app["vlan"]),
                  [("run_command", {"device": lab.core, "command": "show ip access-lists %s" % acl}, self.show_acl(app["vlan"]))])
        seq = self.acl(app["vlan"])[-1][0] + 10
        line = "%d %s" % (seq, line_rule)
        self.turn("There is no permit for %s port %d, so the deny at sequence 1000 drops it. Adding the rule before the deny."
                  % (db["ip"], db["port"]),
                  [("apply_config", {"device": lab.core, "lines": ["ip access-list extended %s" % acl, line],
                                     "comment": "CHG%d allow %s to %s:%d" % (rng.randrange(10000, 99999), app["name"], db["name"], db["port"])},
                    "lab-core01(config)#ip access-list extended %s\nlab-core01(config-ext-nacl)#%s\nlab-core01(config-ext-nacl)#end\n"
                    "lab-core01#write memory\nBuilding configuration...\n[OK]" % (acl, line))])
        self.acl(app["vlan"]).append((seq, line_rule))
        self.turn(None, [("check_port", {"host": db["ip"], "port": db["port"]},
                          "tcp %s:%d from lab-jump01: open (connect time %.2f ms)" % (db["ip"], db["port"], rng.uniform(0.2, 2.5)))])
        self.answer("Fixed. %s had no permit for TCP %d to %s, so traffic hit the deny at sequence 1000. I added `%s` to %s on %s; "
                    "port %d on %s is now reachable." % (acl, db["port"], db["ip"], line, acl, lab.core, db["port"], db["ip"]))

    def ep_subinterface(self):
        lab, rng = self.lab, self.rng
        free = [v for v in range(200, 260) if v not in lab.vlans]
        if not free:
            return self.ep_ping()
        vlan = rng.choice(free)
        sub, gw = lab.subif(vlan), lab.gw(vlan)
        self.user(rng.choice([
            "We need a new VLAN %d for the build servers, 10.%d.%d.0/24 with the gateway on the core. Ticket CHG%d." % (vlan, lab.octet2, vlan, rng.randrange(10000, 99999)),
            "Please create the routed subinterface for VLAN %d (10.%d.%d.0/24) on %s." % (vlan, lab.octet2, vlan, lab.core)]))
        rows = ["Interface              IP-Address      OK? Method Status                Protocol",
                "GigabitEthernet0/0/0   198.51.100.%-3d  YES NVRAM  up                    up      " % rng.randrange(2, 250),
                "GigabitEthernet0/0/1   unassigned      YES NVRAM  up                    up      "]
        rows += ["%-22s %-15s YES NVRAM  up                    up      " % (lab.subif(v), lab.gw(v)) for v in lab.vlans]
        self.turn("Checking the existing subinterfaces on %s first." % lab.core,
                  [("run_command", {"device": lab.core, "command": "show ip interface brief | include GigabitEthernet0/0"},
                    "\n".join(r.rstrip() for r in rows))])
        lines = ["interface %s" % sub, " description VLAN %d build servers" % vlan, " encapsulation dot1Q %d" % vlan,
                 " ip address %s 255.255.255.0" % gw, " ip access-group VLAN%d-IN in" % vlan, " no shutdown"]
        self.turn("%s is free. Creating it with %s/24." % (sub, gw),
                  [("apply_config", {"device": lab.core, "lines": lines, "comment": "new VLAN %d build servers" % vlan},
                    "\n".join("lab-core01(config%s)#%s" % ("" if i == 0 else "-subif", l.strip()) for i, l in enumerate(lines))
                    + "\nlab-core01(config-subif)#end\nlab-core01#write memory\n[OK]")])
        lab.vlans.append(vlan)
        self.turn(None, [("run_command", {"device": lab.core, "command": "show ip interface brief %s" % sub},
                          "Interface              IP-Address      OK? Method Status                Protocol\n"
                          "%-22s %-15s YES manual up                    up" % (sub, gw))])
        self.answer("%s is up with %s/24 (encapsulation dot1Q %d). Remember to add VLAN %d to the trunk on the switches "
                    "and to fill VLAN%d-IN." % (sub, gw, vlan, vlan, vlan))

    def ep_move_vlan(self):
        lab, rng = self.lab, self.rng
        h = rng.choice(lab.hosts)
        new = rng.choice([v for v in lab.vlans if v != h["vlan"]])
        port = lab.long_port(h["swport"])
        self.user("Please move %s to VLAN %d, ticket CHG%d." % (h["name"], new, rng.randrange(10000, 99999)))
        self.turn("Checking the current configuration of %s on %s." % (port, h["switch"]),
                  [("run_command", {"device": h["switch"], "command": "show running-config interface %s" % port}, self.show_run_int(h))])
        self.turn("%s is in access VLAN %d. Changing it to %d." % (port, h["vlan"], new),
                  [("apply_config", {"device": h["switch"], "lines": ["interface %s" % port, "switchport access vlan %d" % new],
                                     "comment": "move %s to VLAN %d" % (h["name"], new)},
                    "%s(config)#interface %s\n%s(config-if)#switchport access vlan %d\n%s(config-if)#end\n%s#write memory\n[OK]"
                    % (h["switch"], port, h["switch"], new, h["switch"], h["switch"]))])
        old = h["vlan"]
        h["vlan"] = new
        self.turn(None, [("run_command", {"device": h["switch"], "command": "show running-config interface %s" % port}, self.show_run_int(h))])
        self.answer("Done: %s on %s moved from VLAN %d to VLAN %d. The host needs an address in 10.%d.%d.0/24 (gateway %s) now."
                    % (port, h["switch"], old, new, lab.octet2, new, lab.gw(new)))

    def ep_descriptions(self):
        sw = self.rng.choice(self.lab.switches)
        self.user("Give me the list of active ports on %s with their descriptions." % sw)
        out = self.show_int_desc(sw)
        self.turn(None, [("run_command", {"device": sw, "command": "show interfaces description"}, out)])
        ups = [l.split()[0] + " (" + " ".join(l.split()[3:]) + ")" for l in out.splitlines()[1:] if " up " in l and l.startswith("Gi")]
        self.answer("Active access ports on %s: %s. The uplink Te1/1/1 and Port-channel1 are up." % (sw, ", ".join(ups)))

    def ep_uplink(self):
        sw = self.rng.choice(self.lab.switches)
        self.user("Is the uplink of %s healthy? Users report slowness." % sw)
        out, crc = self.show_int_counters(sw)
        self.turn("Checking TenGigabitEthernet1/1/1 counters on %s." % sw,
                  [("run_command", {"device": sw, "command": "show interfaces TenGigabitEthernet1/1/1"}, out)])
        verdict = ("no input errors and no CRC errors" if crc == 0 else
                   "%d CRC errors on input, which points at the optic or the fibre patch" % crc)
        self.answer("TenGigabitEthernet1/1/1 on %s is up at 10Gb/s full duplex with %s." % (sw, verdict))

    def ep_ping(self):
        lab, rng = self.lab, self.rng
        h = rng.choice(lab.hosts)
        self.user("Can the core reach %s?" % h["name"])
        loss = rng.choice([0, 0, 0, 20])
        ok = 5 - loss // 20
        self.turn(None, [("ping", {"device": lab.core, "target": h["ip"], "count": 5, "source": lab.subif(h["vlan"])},
                          "Type escape sequence to abort.\nSending 5, 100-byte ICMP Echos to %s, timeout is 2 seconds:\n"
                          "Packet sent with a source address of %s\n%s\nSuccess rate is %d percent (%d/5), round-trip min/avg/max = 1/%d/%d ms"
                          % (h["ip"], lab.gw(h["vlan"]), "!" * ok + "." * (5 - ok), 100 - loss, ok, rng.randrange(1, 4), rng.randrange(4, 9)))])
        self.answer("%s (%s) answers %d of 5 pings from %s sourced from %s." % (h["name"], h["ip"], ok, lab.core, lab.subif(h["vlan"])))

    def episodes(self):
        return [self.ep_locate, self.ep_port_check, self.ep_move_vlan, self.ep_descriptions, self.ep_uplink, self.ep_ping,
                self.ep_subinterface]

    def build(self):
        episodes = self.episodes()
        # The first episodes cover every kind once (in a seeded order), then kinds are drawn. An
        # episode that would overshoot the target is undone; after 8 in a row the session ends.
        order = episodes[:]
        self.rng.shuffle(order)
        i = misses = 0
        while misses < 8:
            saved = copy.deepcopy((self.lab, self.messages, self.n_calls, self.port_checks), {id(self.rng): self.rng})
            ep = order[i] if i < len(order) else self.rng.choice(episodes)
            i += 1
            ep()
            if self.chars() > self.target_chars:
                self.lab, self.messages, self.n_calls, self.port_checks = saved
                misses += 1
            else:
                misses = 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--target-tokens", type=int, required=True)
    ap.add_argument("--chars-per-token", type=float, default=2.5)
    ap.add_argument("--kind", default="netops", choices=["netops", "dbrecovery", "codeedit", "support"],
                    help="the task: network operations (default), database recovery, a code-editing agent, a support desk")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    if a.target_tokens <= 0 or a.chars_per_token <= 0:
        sys.exit("gen_session.py: --target-tokens and --chars-per-token must be positive")
    if a.kind == "netops":
        kind = Session
    else:
        import gen_kinds  # beside this file: the other tasks, on the same episode machinery
        kind = gen_kinds.KINDS[a.kind]
    s = kind(a.seed, int(a.target_tokens * a.chars_per_token))
    s.build()
    meta = {"generator": "examples/gen_session.py", "seed": a.seed, "target_tokens": a.target_tokens,
            "chars_per_token": a.chars_per_token}
    if a.kind != "netops":
        meta["kind"] = a.kind
    doc = {"metadata": meta, "tools": s.tools, "messages": s.messages}
    with open(a.output, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
