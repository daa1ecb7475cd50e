#!/usr/bin/env python3
"""Cuts a chat session at message boundaries: the tools, and the first N messages unchanged.

    python3 examples/cut_session.py examples/netops-session.json --messages 31 -o examples/netops-demo.json
    python3 examples/cut_session.py examples/netops-session.json --from 13 --messages 31 -o examples/netops-demo-short.json

--from K keeps the system message and drops messages 1..K-1 (message K must be a user turn), so a
shorter session keeps the turns of its end.

Deterministic (standard library only): the same arguments give the same bytes. The cut is
recorded under metadata.cut (ignored when the workload is loaded). A cut must end on an
assistant message that is not a tool call, so that no call is left without its result.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("session")
    ap.add_argument("--messages", type=int, required=True, help="keep the first N messages")
    ap.add_argument("--from", dest="start", type=int, default=1,
                    help="drop messages 1..K-1 after the system message (message K: a user turn)")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    with open(a.session, encoding="utf-8") as f:
        doc = json.load(f)
    msgs = doc["messages"]
    if not 1 <= a.messages <= len(msgs):
        sys.exit(f"{a.session}: --messages {a.messages} outside 1..{len(msgs)}")
    last = msgs[a.messages - 1]
    if last.get("role") != "assistant" or last.get("tool_calls"):
        sys.exit(f"{a.session}: message {a.messages - 1} is not an assistant answer; cut elsewhere")
    if a.start != 1 and not (msgs[0].get("role") == "system" and 1 < a.start < a.messages
                             and msgs[a.start].get("role") == "user"):
        sys.exit(f"{a.session}: --from {a.start}: message {a.start} is not a user turn after the system message")
    out = {"metadata": dict(doc.get("metadata", {}))}
    out["metadata"]["cut"] = {"from": a.session.split("/")[-1], "messages": a.messages}
    if a.start != 1:
        out["metadata"]["cut"]["first"] = a.start
    out.update({k: v for k, v in doc.items() if k not in ("metadata", "messages")})
    out["messages"] = msgs[:1] + msgs[a.start : a.messages] if a.start != 1 else msgs[: a.messages]
    with open(a.output, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
