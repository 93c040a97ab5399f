#!/usr/bin/env python3
"""Hostile PFCP against a running UPF: Scapy-built messages (scapy.contrib.pfcp) cut, stretched
and corrupted byte by byte, plus garbage datagrams.

For every case it records what came back (message type, Cause, Offending IE, header SEID),
then checks the node is unharmed: a Heartbeat Request is answered, a Session Modification of
a session established before the suite is accepted, and (with --metrics) the workers' tx
counters on the Prometheus page keep growing; it also records how the PFCP decode-error
counters by kind moved. One JSON object on stdout; the Rust test judges it against
TS 29.244 section 7.6 (error handling) and the causes of 7.5.2 - 7.5.4.
"""
import argparse
import json
import random
import re
import socket
import sys
import time
import urllib.request

try:
    from scapy.contrib.pfcp import *  # noqa: F401,F403
except ImportError:
    sys.exit(3)

ACCEPTED = 1
CP_NODE = "127.0.0.1"


def ies_of(pkt):
    return list(getattr(pkt, "IE_list", []) or [])


def find(ies, cls):
    for ie in ies:
        if isinstance(ie, cls):
            return ie
    return None


def fix_len(b):
    """Rewrite the header's Message Length (octets 3-4: everything after the first 4)."""
    b = bytearray(b)
    b[2:4] = (len(b) - 4).to_bytes(2, "big")
    return bytes(b)


def raw_ie(t, value):
    return t.to_bytes(2, "big") + len(value).to_bytes(2, "big") + value


class Hostile:
    def __init__(self, upf, metrics):
        self.upf = upf
        self.metrics = metrics
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.seq = 100
        self.prior = None  # (cp seid, up seid)
        self.mods = 0
        self.last_tx = self.tx_total()
        # Session Report Requests the UPF sent us: (our SEID, [(URR ID, trigger names)]).
        self.reports = []
        # Node Report Requests: {"upfr": [peer, ...], "uprr": [peer, ...]}.
        self.node_reports = []

    def next_seq(self):
        self.seq += 1
        return self.seq

    def raw(self, body, seid=None, seq=None):
        return bytes(PFCP(version=1, S=0 if seid is None else 1, seq=seq or self.next_seq(),
                          seid=seid or 0) / body)

    def exchange(self, data, wait=1.0):
        """Send one datagram; the first datagram back that is not a request of the UPF's own
        (Heartbeat / Session Report) is the answer; None when nothing comes in `wait` s."""
        self.sock.sendto(data, self.upf)
        end = time.time() + wait
        while time.time() < end:
            self.sock.settimeout(max(0.01, end - time.time()))
            try:
                got, peer = self.sock.recvfrom(65535)
            except socket.timeout:
                return None
            pkt = PFCP(got)
            if self.upf_request(pkt, peer):
                continue
            return pkt
        return None

    def upf_request(self, pkt, peer):
        """Answer a request of the UPF's own (Heartbeat, Session / Node Report); True if it
        was one."""
        if isinstance(pkt.payload, PFCPHeartbeatRequest):
            self.sock.sendto(bytes(PFCP(version=1, S=0, seq=pkt.seq) / PFCPHeartbeatResponse(
                IE_list=[IE_RecoveryTimeStamp(timestamp=0xE6F00002)])), peer)
            return True
        if isinstance(pkt.payload, PFCPSessionReportRequest):
            self.answer_report(pkt, peer)
            return True
        if isinstance(pkt.payload, PFCPNodeReportRequest):
            self.answer_node_report(pkt, peer)
            return True
        return False

    def answer_node_report(self, pkt, peer):
        """Keep the peers of a Node Report Request (Scapy decodes it) and accept it."""
        rep = {"upfr": [], "uprr": []}
        for ie in ies_of(pkt.payload):
            if isinstance(ie, IE_NodeReportType):
                rep["type_upfr"] = int(ie.UPFR)
            elif isinstance(ie, IE_UserPlanePathFailureReport):
                rep["upfr"] += [p.ipv4 if p.V4 else p.ipv6 for p in ies_of(ie)
                                if isinstance(p, IE_RemoteGTP_U_Peer)]
            elif getattr(ie, "ietype", None) == 187:
                rep["uprr"].append("present")
        self.node_reports.append(rep)
        self.sock.sendto(bytes(PFCP(version=1, S=0, seq=pkt.seq) / PFCPNodeReportResponse(
            IE_list=[IE_NodeId(id_type=0, ipv4=CP_NODE), IE_Cause(cause=ACCEPTED)])), peer)

    def answer_report(self, pkt, peer):
        """Keep what a Session Report Request reports and acknowledge it (cause 1)."""
        urrs = []
        for u in ies_of(pkt.payload):
            if isinstance(u, IE_UsageReport_SRR):
                ids = find(ies_of(u), IE_URR_Id)
                trig = find(ies_of(u), IE_UsageReportTrigger)
                names = [f.name for f in trig.fields_desc
                         if f.name not in ("ietype", "length", "extra_data")
                         and getattr(trig, f.name)] if trig is not None else []
                urrs.append([ids.id if ids is not None else None, names])
        self.reports.append([pkt.seid, urrs])
        self.sock.sendto(bytes(PFCP(version=1, S=1, seq=pkt.seq, seid=pkt.seid)
                               / PFCPSessionReportResponse(IE_list=[IE_Cause(cause=ACCEPTED)])), peer)

    @staticmethod
    def summary(pkt):
        if pkt is None:
            return None
        ies = ies_of(pkt.payload)
        c = find(ies, IE_Cause)
        o = find(ies, IE_OffendingIE)
        return {"type": pkt.message_type, "version": pkt.version, "seq": pkt.seq,
                "seid": pkt.seid if pkt.S else None,
                "cause": c.cause if c is not None else None,
                "offending_ie": o.type if o is not None else None,
                "fseid": find(ies, IE_FSEID) is not None}

    # -- messages ------------------------------------------------------------------------
    def heartbeat_bytes(self, extra=b""):
        return fix_len(self.raw(PFCPHeartbeatRequest(
            IE_list=[IE_RecoveryTimeStamp(timestamp=0xE6F00002)])) + extra)

    def establishment(self, cp_seid, ue, pdrs=None, fars=None, fteid=None, sdf=None):
        pdi = [IE_SourceInterface(interface=0),
               fteid or IE_FTEID(V4=1, CH=1),
               IE_NetworkInstance(instance="internet"),
               IE_UE_IP_Address(V4=1, SD=0, ipv4=ue)]
        if sdf is not None:
            pdi.append(IE_SDF_Filter(FD=1, flow_description=sdf))
        pdrs = pdrs or [
            IE_CreatePDR(IE_list=[IE_PDR_Id(id=1), IE_Precedence(precedence=100),
                                  IE_PDI(IE_list=pdi), IE_OuterHeaderRemoval(header=0),
                                  IE_FAR_Id(id=1)]),
            IE_CreatePDR(IE_list=[IE_PDR_Id(id=2), IE_Precedence(precedence=100),
                                  IE_PDI(IE_list=[IE_SourceInterface(interface=1),
                                                  IE_UE_IP_Address(V4=1, SD=1, ipv4=ue)]),
                                  IE_FAR_Id(id=2)])]
        fars = fars or [
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=1), IE_ApplyAction(FORW=1),
                                  IE_ForwardingParameters(IE_list=[IE_DestinationInterface(interface=1)])]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=2), IE_ApplyAction(FORW=1),
                                  IE_ForwardingParameters(IE_list=[
                                      IE_DestinationInterface(interface=0),
                                      IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=0x77, ipv4="192.0.2.77")])])]
        return PFCPSessionEstablishmentRequest(IE_list=[
            IE_NodeId(id_type=0, ipv4=CP_NODE),
            IE_FSEID(v4=1, seid=cp_seid, ipv4=CP_NODE)] + pdrs + fars)

    def establish(self, cp_seid, ue, **kw):
        return self.exchange(self.raw(self.establishment(cp_seid, ue, **kw), seid=0))

    def modify_prior(self):
        self.mods += 1
        body = PFCPSessionModificationRequest(IE_list=[IE_UpdateFAR(IE_list=[
            IE_FAR_Id(id=2), IE_ApplyAction(FORW=1),
            IE_UpdateForwardingParameters(IE_list=[
                IE_DestinationInterface(interface=0),
                IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=0x1000 + self.mods, ipv4="192.0.2.78")])])])
        r = self.exchange(self.raw(body, seid=self.prior[1]))
        return r is not None and isinstance(r.payload, PFCPSessionModificationResponse) \
            and r.seid == self.prior[0] and find(ies_of(r.payload), IE_Cause).cause == ACCEPTED

    def delete(self, up_seid):
        r = self.exchange(self.raw(PFCPSessionDeletionRequest(IE_list=[]), seid=up_seid))
        return r is not None and find(ies_of(r.payload), IE_Cause).cause == ACCEPTED

    # -- metrics -------------------------------------------------------------------------
    def page(self):
        if not self.metrics:
            return ""
        with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=2) as r:
            return r.read().decode()

    def tx_total(self):
        return sum(float(v) for v in re.findall(
            r"^peregrine_port_tx_packets_total\{[^}]*\} (\S+)$", self.page(), re.M))

    def decode_errors(self):
        return {k: float(v) for k, v in re.findall(
            r'^peregrine_pfcp_decode_errors_total\{kind="([^"]+)"\} (\S+)$', self.page(), re.M)}

    def forwarding_grows(self):
        """The page is refreshed once a second: wait up to 3 s for the tx total to grow."""
        if not self.metrics:
            return None
        end = time.time() + 3.0
        while time.time() < end:
            tx = self.tx_total()
            if tx > self.last_tx:
                self.last_tx = tx
                return True
            self.answer_heartbeats(0.1)
        return False

    def answer_heartbeats(self, wait):
        """Keep the association alive (the UPF's Heartbeat Requests) while waiting."""
        end = time.time() + wait
        while time.time() < end:
            self.sock.settimeout(max(0.01, end - time.time()))
            try:
                got, peer = self.sock.recvfrom(65535)
            except socket.timeout:
                return
            self.upf_request(PFCP(got), peer)

    def settled_decode_errors(self, before, expect_kind):
        """Decode-error counters once the page shows the case (or after 3 s)."""
        end = time.time() + 3.0
        while True:
            now = self.decode_errors()
            if expect_kind is None or now.get(expect_kind, 0) > before.get(expect_kind, 0) \
                    or time.time() > end:
                return {k: now.get(k, 0) - before.get(k, 0)
                        for k in set(now) | set(before) if now.get(k, 0) != before.get(k, 0)}
            self.answer_heartbeats(0.1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upf", default="127.0.0.1:8805")
    ap.add_argument("--metrics", default="", help="host:port of the Prometheus page")
    ap.add_argument("--max-sessions", type=int, required=True,
                    help="the UPF's max_sessions, to fill the table (cause 75)")
    a = ap.parse_args()
    host, port = a.upf.rsplit(":", 1)
    h = Hostile((host, int(port)), a.metrics)
    out = {"setup": {}, "cases": []}

    # Set up: association and one session everything after must leave alone.
    r = h.exchange(h.raw(PFCPAssociationSetupRequest(IE_list=[
        IE_NodeId(id_type=0, ipv4=CP_NODE), IE_RecoveryTimeStamp(timestamp=0xE6F00002)])))
    out["setup"]["association"] = h.summary(r)
    r = h.establish(0x9000, "10.99.0.1")
    out["setup"]["prior"] = h.summary(r)
    h.prior = (0x9000, find(ies_of(r.payload), IE_FSEID).seid)
    live = 1  # PFCP sessions in the table

    def case(name, data, expect_kind=None, wait=1.0, after=None):
        before = h.decode_errors() if a.metrics else {}
        t0 = time.time()
        resp = h.exchange(data, wait=wait) if data is not None else None
        res = {"name": name, "sent_bytes": len(data) if data else 0, "response": h.summary(resp)}
        if after is not None:
            res.update(after(resp))
        res["heartbeat_ok"] = h.exchange(h.heartbeat_bytes()) is not None
        res["prior_modified"] = h.modify_prior()
        res["forwarding"] = h.forwarding_grows()
        m = re.search(r"^peregrine_pfcp_sessions (\S+)$", h.page(), re.M)
        res["pfcp_sessions"] = float(m.group(1)) if m else None
        res["decode_errors"] = h.settled_decode_errors(before, expect_kind) if a.metrics else None
        res["seconds"] = round(time.time() - t0, 3)
        out["cases"].append(res)
        return resp

    def good():
        return h.raw(h.establishment(0x9100, "10.99.1.1"), seid=0)
    # The last IE (a Create FAR) loses 3 octets: its length now overruns the message.
    case("truncated_ie", fix_len(good()[:-3]), "ie_length")
    # The Node ID IE claims 0xfff0 octets.
    b = bytearray(good())
    b[18:20] = (0xFFF0).to_bytes(2, "big")
    case("overlong_ie_length", bytes(b), "ie_length")
    # Unknown IE types (TS 29.244 7.6: ignored): in a Heartbeat, and in an Establishment.
    case("unknown_ie_heartbeat", h.heartbeat_bytes(raw_ie(0x7FF0, b"\x01\x02\x03")))

    def keep(resp):
        nonlocal live
        if resp is not None and find(ies_of(resp.payload), IE_FSEID) is not None:
            live += 1
            return {"up_seid": find(ies_of(resp.payload), IE_FSEID).seid}
        return {}
    unk = case("unknown_ie_establishment",
               fix_len(h.raw(h.establishment(0x9101, "10.99.1.2"), seid=0) + raw_ie(0x7FF1, b"zz")),
               after=keep)
    # Missing mandatory IEs: F-SEID (57), Node ID (60).
    e = h.establishment(0x9102, "10.99.1.3")
    e.IE_list = [ie for ie in e.IE_list if not isinstance(ie, IE_FSEID)]
    case("missing_fseid", h.raw(e, seid=0), "mandatory_ie_missing")
    e = h.establishment(0x9103, "10.99.1.4")
    e.IE_list = [ie for ie in e.IE_list if not isinstance(ie, IE_NodeId)]
    case("missing_node_id", h.raw(e, seid=0), "mandatory_ie_missing")
    # A PDR whose FAR does not exist; duplicate PDR IDs; duplicate FAR IDs.
    e = h.establishment(0x9104, "10.99.1.5", fars=[
        IE_CreateFAR(IE_list=[IE_FAR_Id(id=1), IE_ApplyAction(FORW=1)])])
    case("pdr_references_missing_far", h.raw(e, seid=0))
    pdr = IE_CreatePDR(IE_list=[IE_PDR_Id(id=1), IE_Precedence(precedence=1),
                                IE_PDI(IE_list=[IE_SourceInterface(interface=1),
                                                IE_UE_IP_Address(V4=1, SD=1, ipv4="10.99.1.6")]),
                                IE_FAR_Id(id=1)])
    e = h.establishment(0x9105, "10.99.1.6", pdrs=[pdr, pdr],
                        fars=[IE_CreateFAR(IE_list=[IE_FAR_Id(id=1), IE_ApplyAction(DROP=1)])])
    case("duplicate_pdr_id", h.raw(e, seid=0))
    far = IE_CreateFAR(IE_list=[IE_FAR_Id(id=1), IE_ApplyAction(DROP=1)])
    e = h.establishment(0x9106, "10.99.1.7", pdrs=[pdr], fars=[far, far])
    case("duplicate_far_id", h.raw(e, seid=0))
    # An SEID we never allocated.
    case("unknown_session", h.raw(PFCPSessionModificationRequest(IE_list=[]), seid=0xDEADBEEF))
    # F-TEID CHOOSE for IPv6 only, on a UPF whose N3 is IPv4 only.
    case("choose_v6_without_n3_v6",
         h.raw(h.establishment(0x9107, "10.99.1.8", fteid=IE_FTEID(V6=1, CH=1)), seid=0))
    # An SDF filter the rule compiler cannot parse.
    case("unparsable_sdf_filter",
         h.raw(h.establishment(0x9108, "10.99.1.9", sdf="permit out 17 from bogus to assigned"),
               seid=0))
    # A FAR whose Destination Interface is a spare value (6-15, TS 29.244 section 8.2.24).
    case("spare_destination_interface",
         h.raw(h.establishment(0x9109, "10.99.1.10", fars=[
             IE_CreateFAR(IE_list=[IE_FAR_Id(id=1), IE_ApplyAction(FORW=1),
                                   IE_ForwardingParameters(IE_list=[IE_DestinationInterface(interface=6)])]),
             IE_CreateFAR(IE_list=[IE_FAR_Id(id=2), IE_ApplyAction(FORW=1),
                                   IE_ForwardingParameters(IE_list=[
                                       IE_DestinationInterface(interface=0),
                                       IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=0x77, ipv4="192.0.2.77")])])]),
               seid=0))
    # IEs we would otherwise accept and ignore (docs/upf.md "IE audit"): Monitoring Time in a
    # Create URR is refused by name (73, Offending IE 33); Create Traffic Endpoint at the top
    # of an establishment is Service not supported (76, Offending IE 127).
    urr = IE_CreateURR(IE_list=[IE_URR_Id(id=1), IE_MeasurementMethod(VOLUM=1),
                                IE_ReportingTriggers(volume_threshold=1),
                                IE_MonitoringTime(time_value=0xE6F00100)])
    e = h.establishment(0x910A, "10.99.1.11")
    e.IE_list = e.IE_list + [urr]
    case("monitoring_time_in_urr", h.raw(e, seid=0))
    cte = raw_ie(127, raw_ie(131, b"\x01") + raw_ie(21, b"\x05" + (0x99).to_bytes(4, "big")
                                                      + bytes([192, 0, 2, 1])))
    case("create_traffic_endpoint",
         fix_len(h.raw(h.establishment(0x910B, "10.99.1.12"), seid=0) + cte))
    # Garbage: too short for a header, random bytes, all zeros, an unknown message type.
    for name, data, kind in [
            ("garbage_short", b"\xde\xad", "truncated"),
            ("garbage_random", random.Random(7).randbytes(300), None),
            ("garbage_zeros", bytes(64), None),
            ("unknown_message_type", fix_len(bytes([0x20, 0xEE, 0, 0, 0, 0, 9, 0]) + b"\0" * 8),
             "unknown_message_type")]:
        case(name, data, kind, wait=0.5)
    # 65,000 octets: a Heartbeat carrying one huge unknown IE.
    hb = h.heartbeat_bytes()
    case("huge_65000_bytes", fix_len(hb + raw_ie(0x7FF2, bytes(65000 - len(hb) - 4))))
    # Version 2 in the header (TS 29.244 7.4.4.7: Version Not Supported Response).
    b = bytearray(h.heartbeat_bytes())
    b[0] = (b[0] & 0x1F) | (2 << 5)
    case("version_2", bytes(b), "unsupported_version")

    # Fill the table: with `live` sessions up, max_sessions - live more fit, the next gets 75.
    fillers = []
    for i in range(a.max_sessions - live):
        r = h.establish(0x9200 + i, f"10.99.2.{i + 1}")
        s = h.summary(r)
        if s is None or s["cause"] != ACCEPTED:
            out["setup"]["filler_failed"] = s
            break
        fillers.append(find(ies_of(r.payload), IE_FSEID).seid)
    out["setup"]["fillers"] = len(fillers)
    case("session_table_full", h.raw(h.establishment(0x92FF, "10.99.2.250"), seid=0))
    out["setup"]["fillers_deleted"] = sum(h.delete(s) for s in fillers)
    if unk is not None and find(ies_of(unk.payload), IE_FSEID) is not None:
        out["setup"]["unknown_ie_session_deleted"] = h.delete(find(ies_of(unk.payload), IE_FSEID).seid)
    out["setup"]["prior_still_modifiable"] = h.modify_prior()
    out["gaps"] = gaps(h)
    print(json.dumps(out))


def gaps(h):
    """Issue 14 item 6 with Scapy's bytes: a URR with a 2 s Time Quota (TIMQU), QAURR with a
    Query URR Reference, and the TIMQU report when the quota runs out."""
    g = {}
    urr = IE_CreateURR(IE_list=[IE_URR_Id(id=1), IE_MeasurementMethod(VOLUM=1, DURAT=1),
                                IE_ReportingTriggers(time_quota=1), IE_TimeQuota(quota=2)])
    e = h.establishment(0x9400, "10.99.4.1")
    e.IE_list = e.IE_list + [urr]
    t0 = time.time()
    r = h.exchange(h.raw(e, seid=0))
    g["establishment"] = h.summary(r)
    if r is None or find(ies_of(r.payload), IE_FSEID) is None:
        return g
    up = find(ies_of(r.payload), IE_FSEID).seid
    q = PFCPSessionModificationRequest(IE_list=[IE_PFCPSMReqFlags(QUARR=1),
                                                IE_QueryURRReference(reference=0x51AB)])
    r = h.exchange(h.raw(q, seid=up))
    g["qaurr"] = h.summary(r)
    reps = []
    for u in ies_of(r.payload) if r is not None else []:
        if isinstance(u, IE_UsageReport_SMR):
            ref = find(ies_of(u), IE_QueryURRReference)
            trig = find(ies_of(u), IE_UsageReportTrigger)
            reps.append({"urr": find(ies_of(u), IE_URR_Id).id,
                         "immer": bool(trig is not None and trig.IMMER),
                         "reference": ref.reference if ref is not None else None})
    g["qaurr_reports"] = reps
    # The quota runs out 2 s after the establishment: a Session Report Request with TIMQU.
    while time.time() < t0 + 6 and not h.reports:
        h.exchange(h.heartbeat_bytes(), wait=0.5)
    g["reports"] = h.reports
    g["deleted"] = h.delete(up)
    # GTP-U path supervision: the pcap gNB never answers the UPF's Echo Requests, so its
    # paths fail and the UPF says so in Node Report Requests (Scapy decodes them here).
    g["node_reports"] = h.node_reports
    return g


if __name__ == "__main__":
    main()
