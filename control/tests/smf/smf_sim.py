#!/usr/bin/env python3
"""An SMF simulator built on Scapy's PFCP layer (scapy.contrib.pfcp), for end-to-end tests.

It drives a UPF over N4 (UDP) the way an SMF does (TS 29.244): Heartbeat, Association Setup,
N Session Establishments (F-TEID CHOOSE, UE IPv4, QFI, OHR, FARs with Outer Header
Creation, a QER with gate and MBR, a URR with periodic reporting), N Session Modifications
(a handover: the downlink FAR points at another gNB/TEID), then N Session Deletions. All the
while it answers the UPF's Heartbeat Requests and Session Report Requests and decodes every
usage report it gets. Requests are pipelined with a window, as a real SMF does under load.

Every response is decoded with Scapy and checked (type, sequence number, SEID, cause, the
mandatory IEs). The result is one JSON object on stdout; the exit status is 0 only if every
check passed. Written independently of Peregrine's PFCP codec: it is the oracle.
"""
import argparse
import json
import socket
import sys
import time

try:
    from scapy.contrib.pfcp import *  # noqa: F401,F403
except ImportError:
    sys.exit(3)

REQUEST_ACCEPTED = 1


def ies_of(pkt):
    return list(getattr(pkt, "IE_list", []) or [])


def find(ies, cls):
    for ie in ies:
        if isinstance(ie, cls):
            return ie
    return None


def find_all(ies, cls):
    return [ie for ie in ies if isinstance(ie, cls)]


def tlvs(b):
    """The IEs of `b` as (type, value) (TS 29.244 section 8.1.1); ValueError on overrun."""
    i = 0
    while i < len(b):
        if i + 4 > len(b):
            raise ValueError("truncated IE header")
        t, n = int.from_bytes(b[i:i + 2], "big"), int.from_bytes(b[i + 2:i + 4], "big")
        if i + 4 + n > len(b):
            raise ValueError(f"IE {t} overruns")
        yield t, b[i + 4:i + 4 + n]
        i += 4 + n


# Usage Report Trigger (8.2.41) bits by name: octet 5 then octet 6.
TRIGGER_BITS = {"PERIO": (0, 0x01), "VOLTH": (0, 0x02), "TIMTH": (0, 0x04), "IMMER": (0, 0x80),
                "VOLQU": (1, 0x01), "TERMR": (1, 0x08)}


class Smf:
    def __init__(self, upf, ue_base, gnb, gnb2, mbr_kbps, period, window, timeout, scapy_every=1):
        self.scapy_every = max(1, scapy_every)
        self.upf = upf
        fam = socket.AF_INET6 if ":" in upf[0] else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_DGRAM)
        # 1,000 sessions with 1 s periods send ~1,000 reports/s: a deep receive queue keeps
        # bursts from being dropped while Scapy (slow) decodes (SO_RCVBUFFORCE needs root).
        for opt in (33, socket.SO_RCVBUF):
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, opt, 16 << 20)
                break
            except OSError:
                pass
        self.sock.bind(("::" if fam == socket.AF_INET6 else "127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.local = self.sock.getsockname()[0]
        self.seq = 1
        self.ue_base = ue_base
        self.gnb, self.gnb2 = gnb, gnb2
        self.mbr = mbr_kbps
        self.period = period
        self.window = window
        self.timeout = timeout
        self.pending = {}  # seq -> (kind, key, sent_at, bytes, tries)
        self.reports_seen = set()  # (CP SEID, seq) of Session Report Requests answered
        self.errors = []
        self.stats = {
            "heartbeats_answered_by_upf": 0, "upf_heartbeat_requests": 0,
            "session_reports": 0, "usage_reports": 0, "usage_report_triggers": {},
            "usage_ul_bytes": 0, "usage_dl_bytes": 0, "deletion_usage_reports": 0,
            "retransmissions": 0, "reports_deferred": 0, "report_retransmissions": 0,
        }
        # Session Report Response template (built by Scapy once; seq and SEID patched in).
        self.report_resp = bytearray(bytes(PFCP(version=1, S=1, seq=0, seid=0)
                                           / PFCPSessionReportResponse(IE_list=[IE_Cause(cause=REQUEST_ACCEPTED)])))
        self.sessions = {}  # cp seid -> {"up_seid", "teid", "ue"}
        self.templates = {}  # kind -> (bytes, [(field, offsets)])

    # -- sending -----------------------------------------------------------------------
    def first_report(self, seid, seq):
        """Whether this Session Report Request (by SEID and sequence number) is new: a
        retransmission (T1 expired before our answer reached the UPF, TS 29.244 section 6.4)
        is answered again but its usage is not counted twice."""
        key = (seid, seq)
        if key in self.reports_seen:
            self.stats["report_retransmissions"] += 1
            return False
        self.reports_seen.add(key)
        return True

    def next_seq(self):
        s = self.seq
        self.seq = (self.seq % 0xFFFFFF) + 1
        return s

    def send(self, kind, key, body, seid=None):
        seq = self.next_seq()
        hdr = PFCP(version=1, S=0 if seid is None else 1, seq=seq, seid=seid or 0)
        raw = bytes(hdr / body)
        self.sock.sendto(raw, self.upf)
        self.pending[seq] = [kind, key, time.time(), raw, 0]
        return seq

    # -- receiving -----------------------------------------------------------------------
    def pump(self, until_empty=False, deadline=None):
        """Receive and handle datagrams; retransmit requests unanswered for 2 s (T1)."""
        while True:
            try:
                data, peer = self.sock.recvfrom(65535)
            except socket.timeout:
                data = None
            if data is not None:
                self.handle(data, peer)
            now = time.time()
            for seq, p in list(self.pending.items()):
                if now - p[2] > 2.0:
                    if p[4] >= 3:
                        self.errors.append(f"{p[0]} {p[1]}: no response after 3 retransmissions")
                        del self.pending[seq]
                    else:
                        p[2], p[4] = now, p[4] + 1
                        self.stats["retransmissions"] += 1
                        self.sock.sendto(p[3], self.upf)
            if data is None and (not until_empty or not self.pending):
                return
            if deadline is not None and now > deadline:
                return

    def handle(self, data, peer):
        if len(data) >= 16 and data[1] in (51, 53, 55) and data[0] & 1:
            self.stats["session_responses_seen"] = self.stats.get("session_responses_seen", 0) + 1
            if self.stats["session_responses_seen"] % self.scapy_every:
                self.on_response_fast(data)
                return
        if len(data) >= 16 and data[1] == 56 and data[0] & 1:
            self.stats["session_reports_seen"] = self.stats.get("session_reports_seen", 0) + 1
            if self.stats["session_reports_seen"] % self.scapy_every:
                self.on_report_fast(data, peer)
                return
        try:
            pkt = PFCP(data)
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"undecodable datagram from UPF: {e}")
            return
        body = pkt.payload
        if isinstance(body, PFCPHeartbeatRequest):
            self.stats["upf_heartbeat_requests"] += 1
            resp = PFCP(version=1, S=0, seq=pkt.seq) / PFCPHeartbeatResponse(
                IE_list=[IE_RecoveryTimeStamp(timestamp=0xE6F00001)])
            self.sock.sendto(bytes(resp), peer)
            return
        if isinstance(body, PFCPSessionReportRequest):
            self.on_report(pkt, body, peer)
            return
        p = self.pending.pop(pkt.seq, None)
        if p is None:
            return  # a late duplicate of something already answered
        kind, key = p[0], p[1]
        ies = ies_of(body)
        cause = find(ies, IE_Cause)
        if cause is None:
            if not isinstance(body, PFCPHeartbeatResponse):
                self.errors.append(f"{kind} {key}: response without Cause")
            else:
                self.stats["heartbeats_answered_by_upf"] += 1
            return
        if cause.cause != REQUEST_ACCEPTED:
            off = find(ies, IE_OffendingIE)
            self.errors.append(f"{kind} {key}: cause {cause.cause} offending {off.type if off else None}")
            return
        getattr(self, "on_" + kind)(key, pkt, body, ies)

    def on_association(self, key, pkt, body, ies):
        if not isinstance(body, PFCPAssociationSetupResponse):
            self.errors.append("association: wrong response type")
        f = find(ies, IE_UPFunctionFeatures)
        self.stats["ftup"] = bool(f is not None and f.FTUP)
        self.stats["upf_recovery_ts"] = find(ies, IE_RecoveryTimeStamp).timestamp

    def on_establish(self, key, pkt, body, ies):
        if not isinstance(body, PFCPSessionEstablishmentResponse) or pkt.seid != key:
            self.errors.append(f"establish {key}: wrong type or SEID {pkt.seid}")
            return
        fseid = find(ies, IE_FSEID)
        created = find_all(ies, IE_CreatedPDR)
        teids = [find(ies_of(c), IE_FTEID) for c in created]
        teids = [t for t in teids if t is not None]
        if fseid is None or not teids:
            self.errors.append(f"establish {key}: no UP F-SEID or no allocated F-TEID")
            return
        s = self.sessions[key]
        s["up_seid"] = fseid.seid
        s["teid"] = teids[0].TEID
        s["n3"] = teids[0].ipv4 if teids[0].V4 else None
        s["n3_v6"] = teids[0].ipv6 if teids[0].V6 else None

    def on_modify(self, key, pkt, body, ies):
        if not isinstance(body, PFCPSessionModificationResponse) or pkt.seid != key:
            self.errors.append(f"modify {key}: wrong type or SEID")

    def on_delete(self, key, pkt, body, ies):
        if not isinstance(body, PFCPSessionDeletionResponse) or pkt.seid != key:
            self.errors.append(f"delete {key}: wrong type or SEID")
            return
        reps = find_all(ies, IE_UsageReport_SDR)
        self.stats["deletion_usage_reports"] += len(reps)
        for r in reps:
            self.count_usage(r, key, "deletion")

    def on_heartbeat(self, key, pkt, body, ies):
        pass

    def count_usage(self, rep, cp_seid=None, where="report"):
        rie = ies_of(rep)
        vm = find(rie, IE_VolumeMeasurement)
        if find(rie, IE_URR_Id) is None or find(rie, IE_UR_SEQN) is None:
            self.errors.append("usage report without URR ID or UR-SEQN")
        if vm is not None:
            ul = vm.uplink if vm.ULVOL else 0
            dl = vm.downlink if vm.DLVOL else 0
            self.stats["usage_ul_bytes"] += ul
            self.stats["usage_dl_bytes"] += dl
            s = self.sessions.get(cp_seid)
            if s is not None:
                u = s.setdefault("usage", {})
                for k, v in ((where + "_ul_bytes", ul), (where + "_dl_bytes", dl), (where + "_reports", 1)):
                    u[k] = u.get(k, 0) + v
        trig = find(rie, IE_UsageReportTrigger)
        if trig is not None:
            for name in ("PERIO", "VOLTH", "TIMTH", "VOLQU", "TERMR", "IMMER"):
                if getattr(trig, name, 0):
                    t = self.stats["usage_report_triggers"]
                    t[name] = t.get(name, 0) + 1

    @staticmethod
    def is_periodic(rep):
        trig = find(ies_of(rep), IE_UsageReportTrigger)
        return bool(trig is not None and getattr(trig, "PERIO", 0))

    def on_report_fast(self, data, peer):
        """A Session Report Request checked with a plain TLV walk (TS 29.244 5.1, 8.1.1),
        for the reports Scapy (slow) does not decode."""
        seid = int.from_bytes(data[4:12], "big")
        seq = int.from_bytes(data[12:15], "big")
        if int.from_bytes(data[2:4], "big") + 4 != len(data):
            self.errors.append("session report: header length disagrees with the datagram")
            return

        s = self.sessions.get(seid)
        if s is None or "up_seid" not in s:
            # As `on_report`: left unanswered and uncounted, the UPF retransmits it (T1).
            self.stats["reports_deferred"] += 1
            return
        first = self.first_report(seid, seq)
        try:
            ies = list(tlvs(data[16:]))
            if not any(t == 39 for t, _ in ies):
                self.errors.append("session report without Report Type")
            for t, v in ies:
                if t == 80 and first:  # Usage Report (Session Report Request)
                    self.stats["usage_reports"] += 1
                    self.fast_usage(v)
        except ValueError as e:
            self.errors.append(f"session report: {e}")
            return
        self.stats["session_reports"] += 1
        resp = self.report_resp
        resp[4:12] = s["up_seid"].to_bytes(8, "big")
        resp[12:15] = seq.to_bytes(3, "big")
        self.sock.sendto(bytes(resp), peer)

    def fast_usage(self, v, cp_seid=None, where="report"):
        """A Usage Report's value (7.5.8.3 / 7.5.7.2) by TLV walk: as `count_usage`."""
        sub = dict(tlvs(v))
        if 81 not in sub or 104 not in sub or 63 not in sub:
            self.errors.append("usage report without URR ID, UR-SEQN or trigger")
        trig = self.stats["usage_report_triggers"]
        tb = sub.get(63, b"")
        for name, (octet, bit) in TRIGGER_BITS.items():
            if len(tb) > octet and tb[octet] & bit:
                trig[name] = trig.get(name, 0) + 1
        vm = sub.get(66)
        if vm is not None and len(vm) >= 1:
            flags, off = vm[0], 1
            vals = []
            for bit in (1, 2, 4):
                if flags & bit:
                    vals.append(int.from_bytes(vm[off:off + 8], "big"))
                    off += 8
                else:
                    vals.append(0)
            self.stats["usage_ul_bytes"] += vals[1]
            self.stats["usage_dl_bytes"] += vals[2]

    def on_response_fast(self, data):
        """A Session Establishment / Modification / Deletion Response (7.5.3, 7.5.5, 7.5.7)
        checked with a plain TLV walk: the ones Scapy does not decode."""
        if int.from_bytes(data[2:4], "big") + 4 != len(data):
            self.errors.append("response: header length disagrees with the datagram")
            return
        seid = int.from_bytes(data[4:12], "big")
        seq = int.from_bytes(data[12:15], "big")
        p = self.pending.pop(seq, None)
        if p is None:
            return
        kind, key = p[0], p[1]
        want = {"establish": 51, "modify": 53, "delete": 55}.get(kind)
        if data[1] != want or seid != key:
            self.errors.append(f"{kind} {key}: wrong type {data[1]} or SEID {seid}")
            return
        try:
            ies = list(tlvs(data[16:]))
            cause = [v for t, v in ies if t == 19]
            if not cause or len(cause[0]) != 1:
                self.errors.append(f"{kind} {key}: response without Cause")
                return
            if cause[0][0] != REQUEST_ACCEPTED:
                off = [int.from_bytes(v[:2], "big") for t, v in ies if t == 40]
                self.errors.append(f"{kind} {key}: cause {cause[0][0]} offending {off[0] if off else None}")
                return
            if kind == "establish":
                fseid = [v for t, v in ies if t == 57]
                teids = []
                for t, v in ies:
                    if t == 8:  # Created PDR
                        teids += [f for ft, f in tlvs(v) if ft == 21]
                if not fseid or len(fseid[0]) < 9 or not teids or len(teids[0]) < 5:
                    self.errors.append(f"establish {key}: no UP F-SEID or no allocated F-TEID")
                    return
                f = teids[0]
                s = self.sessions[key]
                s["up_seid"] = int.from_bytes(fseid[0][1:9], "big")
                s["teid"] = int.from_bytes(f[1:5], "big")
                s["n3"] = socket.inet_ntoa(f[5:9]) if f[0] & 1 and len(f) >= 9 else None
                s["n3_v6"] = None
            elif kind == "delete":
                for t, v in ies:
                    if t == 79:  # Usage Report (Session Deletion Response)
                        self.stats["deletion_usage_reports"] += 1
                        self.fast_usage(v, key, "deletion")
        except ValueError as e:
            self.errors.append(f"{kind} {key}: {e}")

    def on_report(self, pkt, body, peer):
        s = self.sessions.get(pkt.seid)
        if s is not None and "up_seid" not in s:
            # Our Establishment Response handling is behind the report (it was retransmitted
            # or is still queued): leave the report unanswered, the UPF retransmits it (T1).
            self.stats["reports_deferred"] += 1
            return
        self.stats["session_reports"] += 1
        first = self.first_report(pkt.seid, pkt.seq)
        ies = ies_of(body)
        if find(ies, IE_ReportType) is None:
            self.errors.append("session report without Report Type")
        for r in find_all(ies, IE_UsageReport_SRR) if first else []:
            self.stats["usage_reports"] += 1
            self.count_usage(r, pkt.seid, "periodic" if self.is_periodic(r) else "report")
        if s is None:
            self.errors.append(f"session report for unknown CP SEID {pkt.seid}")
            resp = bytes(PFCP(version=1, S=1, seq=pkt.seq, seid=0)
                         / PFCPSessionReportResponse(IE_list=[IE_Cause(cause=65)]))
        else:
            resp = self.report_resp
            resp[4:12] = s["up_seid"].to_bytes(8, "big")
            resp[12:15] = pkt.seq.to_bytes(3, "big")
            resp = bytes(resp)
        self.sock.sendto(resp, peer)

    # -- the procedures ----------------------------------------------------------------------
    def node_id(self):
        return IE_NodeId(id_type=0, ipv4="127.0.0.1")

    def heartbeat(self):
        self.send("heartbeat", 0, PFCPHeartbeatRequest(IE_list=[IE_RecoveryTimeStamp(timestamp=0xE6F00001)]))
        self.pump(until_empty=True, deadline=time.time() + self.timeout)

    def associate(self):
        self.send("association", 0, PFCPAssociationSetupRequest(IE_list=[
            self.node_id(), IE_RecoveryTimeStamp(timestamp=0xE6F00001)]))
        self.pump(until_empty=True, deadline=time.time() + self.timeout)

    def ue(self, i):
        b = [int(x) for x in self.ue_base.split(".")]
        n = (b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3]) + i
        return f"{n >> 24 & 255}.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"

    def establishment(self, cp_seid, i):
        ue = self.ue(i)
        self.sessions[cp_seid] = {"ue": ue}
        qfi = 9
        urr = [IE_URR_Id(id=1),
               IE_MeasurementMethod(VOLUM=1, DURAT=1),
               IE_ReportingTriggers(periodic_reporting=1)]
        if self.period:
            urr.append(IE_MeasurementPeriod(period=self.period))
        return PFCPSessionEstablishmentRequest(IE_list=[
            self.node_id(),
            IE_FSEID(v4=1, seid=cp_seid, ipv4="127.0.0.1"),
            IE_CreatePDR(IE_list=[
                IE_PDR_Id(id=1), IE_Precedence(precedence=100),
                IE_PDI(IE_list=[IE_SourceInterface(interface=0),
                                IE_FTEID(V4=1, CH=1, CHID=1, choose_id=1),
                                IE_NetworkInstance(instance="internet"),
                                IE_UE_IP_Address(V4=1, SD=0, ipv4=ue),
                                IE_QFI(QFI=qfi)]),
                IE_OuterHeaderRemoval(header=0),
                IE_FAR_Id(id=1), IE_QER_Id(id=1), IE_URR_Id(id=1)]),
            IE_CreatePDR(IE_list=[
                IE_PDR_Id(id=2), IE_Precedence(precedence=100),
                IE_PDI(IE_list=[IE_SourceInterface(interface=1),
                                IE_NetworkInstance(instance="internet"),
                                IE_UE_IP_Address(V4=1, SD=1, ipv4=ue)]),
                IE_FAR_Id(id=2), IE_QER_Id(id=1), IE_URR_Id(id=1)]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=1), IE_ApplyAction(FORW=1),
                                  IE_ForwardingParameters(IE_list=[IE_DestinationInterface(interface=1),
                                                                   IE_NetworkInstance(instance="internet")])]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=2), IE_ApplyAction(FORW=1),
                                  IE_ForwardingParameters(IE_list=[
                                      IE_DestinationInterface(interface=0),
                                      IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=0x100000 + i, ipv4=self.gnb)])]),
            IE_CreateURR(IE_list=urr),
            IE_CreateQER(IE_list=[IE_QER_Id(id=1), IE_GateStatus(ul=0, dl=0),
                                  IE_MBR(ul=self.mbr, dl=self.mbr), IE_QFI(QFI=qfi)]),
        ])

    def scenario_establishment(self, cp_seid, sc):
        """One session of the live scenario: `sc` says the UE family, the Outer Header
        Removal description (0 IPv4, 1 IPv6, 6 either: TS 29.244 8.2.64), the gate, the
        QER's QFI and whether the uplink PDR also matches on that QFI (PDI QFI)."""
        v6 = sc["family"] == 6
        self.sessions[cp_seid] = {"name": sc["name"], "ue": sc["ue"], "qfi": sc["qfi"],
                                  "ohr": sc["ohr"], "gate_closed": sc["gate_closed"],
                                  "dl_teid": sc["dl_teid"], "gnb": sc["gnb"]}
        ue_ul = IE_UE_IP_Address(V6=1, SD=0, ipv6=sc["ue"]) if v6 else IE_UE_IP_Address(V4=1, SD=0, ipv4=sc["ue"])
        ue_dl = IE_UE_IP_Address(V6=1, SD=1, ipv6=sc["ue"]) if v6 else IE_UE_IP_Address(V4=1, SD=1, ipv4=sc["ue"])
        fteid = IE_FTEID(V6=1, CH=1, CHID=1, choose_id=1) if v6 else IE_FTEID(V4=1, CH=1, CHID=1, choose_id=1)
        ohc = IE_OuterHeaderCreation(GTPUUDPIPV6=1, TEID=sc["dl_teid"], ipv6=sc["gnb"]) if v6 \
            else IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=sc["dl_teid"], ipv4=sc["gnb"])
        pdi_ul = [IE_SourceInterface(interface=0), fteid, IE_NetworkInstance(instance="internet"), ue_ul]
        if sc["pdi_qfi"]:
            pdi_ul.append(IE_QFI(QFI=sc["qfi"]))
        urr = [IE_URR_Id(id=1), IE_MeasurementMethod(VOLUM=1, DURAT=1),
               IE_ReportingTriggers(periodic_reporting=1)]
        if self.period:
            urr.append(IE_MeasurementPeriod(period=self.period))
        gate = 1 if sc["gate_closed"] else 0
        return PFCPSessionEstablishmentRequest(IE_list=[
            self.node_id(),
            IE_FSEID(v4=1, seid=cp_seid, ipv4="127.0.0.1"),
            IE_CreatePDR(IE_list=[
                IE_PDR_Id(id=1), IE_Precedence(precedence=100), IE_PDI(IE_list=pdi_ul),
                IE_OuterHeaderRemoval(header=sc["ohr"]),
                IE_FAR_Id(id=1), IE_QER_Id(id=1), IE_URR_Id(id=1)]),
            IE_CreatePDR(IE_list=[
                IE_PDR_Id(id=2), IE_Precedence(precedence=100),
                IE_PDI(IE_list=[IE_SourceInterface(interface=1),
                                IE_NetworkInstance(instance="internet"), ue_dl]),
                IE_FAR_Id(id=2), IE_QER_Id(id=1), IE_URR_Id(id=1)]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=1), IE_ApplyAction(FORW=1),
                                  IE_ForwardingParameters(IE_list=[IE_DestinationInterface(interface=1),
                                                                   IE_NetworkInstance(instance="internet")])]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=2), IE_ApplyAction(FORW=1),
                                  IE_ForwardingParameters(IE_list=[IE_DestinationInterface(interface=0), ohc])]),
            IE_CreateURR(IE_list=urr),
            IE_CreateQER(IE_list=[IE_QER_Id(id=1), IE_GateStatus(ul=gate, dl=gate),
                                  IE_MBR(ul=self.mbr, dl=self.mbr), IE_QFI(QFI=sc["qfi"])]),
        ])

    def modification(self, cp_seid, i):
        return PFCPSessionModificationRequest(IE_list=[
            IE_UpdateFAR(IE_list=[
                IE_FAR_Id(id=2), IE_ApplyAction(FORW=1),
                IE_UpdateForwardingParameters(IE_list=[
                    IE_DestinationInterface(interface=0),
                    IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=0x200000 + i, ipv4=self.gnb2)])]),
        ])

    # -- request templates -------------------------------------------------------------
    # Scapy takes 1-6 ms to build a request: at 1,000 sessions that is the run's bottleneck.
    # Each kind is built by Scapy once, with sentinel values whose offsets are found and
    # patched per request; every `scapy_every`-th request is also built by Scapy and must be
    # byte-identical, so the templates cannot drift from the oracle.
    T_KEY, T_I = 0x0123456789ABCDEF, 0xBEEF

    @staticmethod
    def locate(raw, value, count):
        offs, j = [], raw.find(value)
        while j >= 0:
            offs.append(j)
            j = raw.find(value, j + 1)
        if len(offs) != count:
            raise RuntimeError(f"template: {value.hex()} found {len(offs)} times, not {count}")
        return offs

    def field(self, name, key, i):
        if name == "key":
            return key.to_bytes(8, "big")
        if name == "ue":
            return socket.inet_aton(self.ue(i))
        return ((0x100000 if name == "dl_teid" else 0x200000) + i).to_bytes(4, "big")

    def template(self, kind, make):
        t = self.templates.get(kind)
        if t is not None:
            return t
        k, i = self.T_KEY, self.T_I
        raw = bytes(PFCP(version=1, S=1, seq=0, seid=0) / make(k, i))
        self.sessions.pop(k, None)
        names = {"establish": [("key", 1), ("ue", 2), ("dl_teid", 1)],
                 "modify": [("dl_teid2", 1)], "delete": []}[kind]
        t = (raw, [(n, self.locate(raw, self.field(n, k, i), c)) for n, c in names])
        self.templates[kind] = t
        return t

    def send_templated(self, kind, key, i, seid, make):
        raw, fields = self.template(kind, make)
        raw = bytearray(raw)
        seq = self.next_seq()
        raw[4:12] = seid.to_bytes(8, "big")
        raw[12:15] = seq.to_bytes(3, "big")
        for name, offs in fields:
            v = self.field(name, key, i)
            for o in offs:
                raw[o:o + len(v)] = v
        if kind == "establish":
            self.sessions[key] = {"ue": self.ue(i)}
        raw = bytes(raw)
        if seq % self.scapy_every == 0:
            ref = bytes(PFCP(version=1, S=1, seq=seq, seid=seid) / make(key, i))
            if ref != raw:
                self.errors.append(f"{kind} {key}: template bytes differ from Scapy's")
                raw = ref
        self.sock.sendto(raw, self.upf)
        self.pending[seq] = [kind, key, time.time(), raw, 0]
        self.stats["templated_requests"] = self.stats.get("templated_requests", 0) + 1

    def windowed(self, kind, items, make, templated=False):
        t0 = time.time()
        for key, i in items:
            while len(self.pending) >= self.window:
                self.pump()
            seid = 0 if kind == "establish" else self.sessions.get(key, {}).get("up_seid")
            if seid is None:
                self.errors.append(f"{kind} {key}: session was never established")
                continue
            if templated:
                self.send_templated(kind, key, i, seid, make)
            else:
                self.send(kind, key, make(key, i), seid=seid)
        self.pump(until_empty=True, deadline=time.time() + self.timeout)
        return time.time() - t0


def live_scenarios(a):
    """The sessions of `--scenario live` (see `run_live`)."""
    ue6 = a.ue6_base.rsplit(":", 1)[0] + ":"
    base = [int(x) for x in a.ue_base.split(".")]

    def ue4(i):
        return ".".join(map(str, base[:3] + [base[3] + i]))
    return [
        {"name": "v4", "family": 4, "ue": ue4(0), "ohr": 0, "qfi": 9, "pdi_qfi": False,
         "gate_closed": False, "gnb": a.gnb, "dl_teid": 0x100001},
        {"name": "v6", "family": 6, "ue": ue6 + "2", "ohr": 1, "qfi": 6, "pdi_qfi": False,
         "gate_closed": False, "gnb": a.gnb6, "dl_teid": 0x100002},
        {"name": "ohr6", "family": 4, "ue": ue4(2), "ohr": 6, "qfi": 8, "pdi_qfi": False,
         "gate_closed": False, "gnb": a.gnb, "dl_teid": 0x100003},
        {"name": "gate", "family": 4, "ue": ue4(3), "ohr": 0, "qfi": 9, "pdi_qfi": False,
         "gate_closed": True, "gnb": a.gnb, "dl_teid": 0x100004},
        {"name": "qfi", "family": 4, "ue": ue4(4), "ohr": 0, "qfi": 7, "pdi_qfi": True,
         "gate_closed": False, "gnb": a.gnb, "dl_teid": 0x100005},
    ]


def run_live(smf, a):
    """`--scenario live`: associate, establish the scenario's sessions, print them as one
    JSON line ({"sessions": [...]}: UP F-TEID, UE, QFI, the FAR's DL TEID...), then serve
    the UPF (heartbeats, Session Report Requests with usage) until a line arrives on stdin,
    then delete every session and print the final JSON (per-session usage: periodic and
    deletion volumes)."""
    import select
    smf.heartbeat()
    smf.associate()
    scs = live_scenarios(a)
    keys = [(0x7000 + i, i) for i in range(len(scs))]
    smf.windowed("establish", keys, lambda k, i: smf.scenario_establishment(k, scs[i]))
    established = sum(1 for s in smf.sessions.values() if "up_seid" in s)
    print(json.dumps({"sessions": [dict(s, cp_seid=k) for k, s in smf.sessions.items()],
                      "errors": smf.errors[:20]}), flush=True)
    end = time.time() + a.timeout * 10
    while time.time() < end:
        smf.pump()
        r, _, _ = select.select([sys.stdin], [], [], 0)
        if r:
            sys.stdin.readline()
            break
    smf.windowed("delete", keys, lambda k, i: PFCPSessionDeletionRequest(IE_list=[]))
    smf.heartbeat()
    out = dict(smf.stats)
    out.update({"sessions": [dict(s, cp_seid=k) for k, s in smf.sessions.items()],
                "established": established, "errors": smf.errors[:20],
                "error_count": len(smf.errors)})
    print(json.dumps(out), flush=True)
    sys.exit(0 if not smf.errors and established == len(scs) else 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upf", default="127.0.0.1:8805")
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--ue-base", default="10.60.0.1")
    ap.add_argument("--gnb", default="192.168.1.10")
    ap.add_argument("--gnb2", default="192.168.1.11")
    ap.add_argument("--mbr-kbps", type=int, default=100000)
    ap.add_argument("--period", type=int, default=1, help="URR measurement period, s (0: none)")
    ap.add_argument("--report-wait", type=float, default=2.5,
                    help="seconds to wait for periodic usage reports before deleting")
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--scenario", choices=["load", "live"], default="load",
                    help="load: N sessions, handover, delete (default); live: the end-to-end "
                    "test's sessions, kept until a line arrives on stdin")
    ap.add_argument("--gnb6", default="2001:db8:3::10", help="IPv6 gNB (live scenario)")
    ap.add_argument("--ue6-base", default="2001:db8:45::1", help="IPv6 UE prefix base (live scenario)")
    ap.add_argument("--scapy-every", type=int, default=1,
                    help="decode every Nth Session Report Request and session response with "
                         "Scapy, the rest with a plain TLV walk (Scapy takes ~0.5 ms a message); "
                         "in the load scenario also build every Nth request with Scapy and check "
                         "the template's bytes against it")
    a = ap.parse_args()
    host, port = a.upf.rsplit(":", 1)
    smf = Smf((host.strip("[]"), int(port)), a.ue_base, a.gnb, a.gnb2, a.mbr_kbps, a.period,
              a.window, a.timeout, a.scapy_every)
    if a.scenario == "live":
        run_live(smf, a)
        return
    smf.heartbeat()
    smf.associate()
    keys = [(0x5000 + i, i) for i in range(a.sessions)]
    t_est = smf.windowed("establish", keys, smf.establishment, templated=True)
    established = sum(1 for s in smf.sessions.values() if "up_seid" in s)
    t_mod = smf.windowed("modify", keys, smf.modification, templated=True)
    end = time.time() + a.report_wait
    while time.time() < end:
        smf.pump()
    t_del = smf.windowed("delete", keys, lambda k, i: PFCPSessionDeletionRequest(IE_list=[]),
                         templated=True)
    smf.heartbeat()
    out = dict(smf.stats)
    out.update({
        "sessions": a.sessions, "established": established,
        "teids_unique": len({s.get("teid") for s in smf.sessions.values()}) == established,
        "establish_s": round(t_est, 3), "modify_s": round(t_mod, 3), "delete_s": round(t_del, 3),
        "errors": smf.errors[:20], "error_count": len(smf.errors),
    })
    print(json.dumps(out))
    sys.exit(0 if not smf.errors and established == a.sessions else 1)


if __name__ == "__main__":
    main()
