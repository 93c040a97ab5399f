#!/usr/bin/env python3
"""Independent PFCP test vectors built with Scapy's PFCP layer (scapy.contrib.pfcp).

Prints one JSON object per line:
  {"name": str, "hex": str, "msg_type": int, "seq": int, "seid": int|null,
   "ies": [IE, ...]}
where IE is {"t": type, "v": value} for leaf IEs and {"t": type, "g": [IE, ...]} for
grouped IEs. The value encodings are the ones of ie_json() in tests/oracle_scapy.rs.
Expected values are written down from the inputs given to Scapy, not read back from it,
except bitmap IEs whose value is the little-endian integer of their flag octets.
"""
import json
import sys

try:
    from scapy.contrib.pfcp import *  # noqa: F401,F403
except ImportError:
    sys.exit(3)


def leaf(ie, t, v):
    return ie, {"t": t, "v": v}


def bitmap(ie, t):
    return ie, {"t": t, "v": int.from_bytes(bytes(ie)[4:], "little")}


def grp(cls, t, children):
    return cls(IE_list=[c[0] for c in children]), {"t": t, "g": [c[1] for c in children]}


def cause(c): return leaf(IE_Cause(cause=c), 19, c)
def rts(ts): return leaf(IE_RecoveryTimeStamp(timestamp=ts), 96, ts)
def pdr_id(i): return leaf(IE_PDR_Id(id=i), 56, i)
def far_id(i): return leaf(IE_FAR_Id(id=i), 108, i)
def urr_id(i): return leaf(IE_URR_Id(id=i), 81, i)
def qer_id(i): return leaf(IE_QER_Id(id=i), 109, i)
def bar_id(i): return leaf(IE_BAR_Id(id=i), 88, i)
def prec(p): return leaf(IE_Precedence(precedence=p), 29, p)
def qfi(q): return leaf(IE_QFI(QFI=q), 124, q)
def src_if(i): return leaf(IE_SourceInterface(interface=i), 20, i)
def dst_if(i): return leaf(IE_DestinationInterface(interface=i), 42, i)
def netinst(n): return leaf(IE_NetworkInstance(instance=n), 22, n)
def offending(t): return leaf(IE_OffendingIE(type=t), 40, t)
def ur_seqn(n): return leaf(IE_UR_SEQN(number=n), 104, n)
def duration(d): return leaf(IE_DurationMeasurement(duration=d), 67, d)
def tfirst(ts): return leaf(IE_TimeOfFirstPacket(timestamp=ts), 69, ts)
def tlast(ts): return leaf(IE_TimeOfLastPacket(timestamp=ts), 70, ts)
def mperiod(p): return leaf(IE_MeasurementPeriod(period=p), 64, p)
def tthresh(p): return leaf(IE_TimeThreshold(threshold=p), 32, p)


def node_v4(a): return leaf(IE_NodeId(id_type=0, ipv4=a), 60, {"ipv4": a})
def node_v6(a): return leaf(IE_NodeId(id_type=1, ipv6=a), 60, {"ipv6": a})
def node_fqdn(n): return leaf(IE_NodeId(id_type=2, id=n), 60, {"fqdn": n})


def fseid(seid, v4=None, v6=None):
    ie = IE_FSEID(seid=seid, v4=int(v4 is not None), v6=int(v6 is not None),
                  ipv4=v4 or "0.0.0.0", ipv6=v6 or "::")
    return leaf(ie, 57, {"seid": seid, "ipv4": v4, "ipv6": v6})


def fteid(teid, v4):
    return leaf(IE_FTEID(V4=1, TEID=teid, ipv4=v4), 21, {"teid": teid, "ipv4": v4, "ipv6": None})


def fteid_ch(chid):
    return leaf(IE_FTEID(V4=1, CH=1, CHID=1, choose_id=chid), 21,
                {"ch": True, "v4": True, "v6": False, "choose_id": chid})


def ueip(v4, sd):
    return leaf(IE_UE_IP_Address(V4=1, SD=sd, ipv4=v4), 93,
                {"sd": bool(sd), "ipv4": v4, "ipv6": None})


def sdf(fd):
    return leaf(IE_SDF_Filter(FD=1, flow_description=fd), 23, {"fd": fd, "id": None})


def ohc_gtpu_v4(teid, v4):
    return leaf(IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=teid, ipv4=v4), 84,
                {"desc": 0x0100, "teid": teid, "ipv4": v4, "ipv6": None, "port": None})


def ohr(d): return leaf(IE_OuterHeaderRemoval(header=d), 95, {"desc": d})
def gate(ul, dl): return leaf(IE_GateStatus(ul=ul, dl=dl), 25, {"ul": ul, "dl": dl})
def mbr(ul, dl): return leaf(IE_MBR(ul=ul, dl=dl), 26, {"ul": ul, "dl": dl})
def gbr(ul, dl): return leaf(IE_GBR(ul=ul, dl=dl), 27, {"ul": ul, "dl": dl})


def volume(cls, t, total=None, ul=None, dl=None):
    ie = cls(TOVOL=int(total is not None), ULVOL=int(ul is not None), DLVOL=int(dl is not None),
             total=total or 0, uplink=ul or 0, downlink=dl or 0)
    return leaf(ie, t, {"total": total, "ul": ul, "dl": dl,
                        "total_packets": None, "ul_packets": None, "dl_packets": None})


def apply_forw(): return bitmap(IE_ApplyAction(FORW=1), 44)
def apply_drop_nocp(): return bitmap(IE_ApplyAction(DROP=1, NOCP=1), 44)


def create_pdr(i, src, far, extra_pdi=()):
    return grp(IE_CreatePDR, 1, [
        pdr_id(i), prec(255),
        grp(IE_PDI, 2, [src_if(src), *extra_pdi]),
        ohr(0), far_id(far), urr_id(1), qer_id(1),
    ])


def create_far(i, fwd):
    return grp(IE_CreateFAR, 3, [far_id(i), apply_forw(), grp(IE_ForwardingParameters, 4, fwd)])


def create_urr():
    return grp(IE_CreateURR, 6, [
        urr_id(1),
        bitmap(IE_MeasurementMethod(VOLUM=1, DURAT=1), 62),
        bitmap(IE_ReportingTriggers(volume_threshold=1, periodic_reporting=1, volume_quota=1), 37),
        mperiod(60),
        volume(IE_VolumeThreshold, 31, total=1000000),
        volume(IE_VolumeQuota, 73, total=5000000, ul=1, dl=2),
        tthresh(3600),
    ])


def create_qer():
    return grp(IE_CreateQER, 7, [qer_id(1), gate(0, 1), mbr(100000, 200000), gbr(1000, 2000), qfi(9)])


def usage_report(cls, t):
    return grp(cls, t, [
        urr_id(1), ur_seqn(7),
        bitmap(IE_UsageReportTrigger(VOLTH=1, TERMR=1), 63),
        volume(IE_VolumeMeasurement, 66, total=3000, ul=1000, dl=2000),
        duration(42), tfirst(0xE6F00000), tlast(0xE6F00010),
    ])


TS = 0xE6F01234
MSGS = []


def msg(name, cls, mtype, seq, ies, seid=None):
    hdr = PFCP(version=1, S=0 if seid is None else 1, seq=seq, seid=seid or 0)
    pkt = hdr / cls(IE_list=[i[0] for i in ies])
    MSGS.append({"name": name, "hex": bytes(pkt).hex(), "msg_type": mtype, "seq": seq,
                 "seid": seid, "ies": [i[1] for i in ies]})


msg("heartbeat_request", PFCPHeartbeatRequest, 1, 1, [rts(TS)])
msg("heartbeat_response", PFCPHeartbeatResponse, 2, 1, [rts(TS + 1)])
msg("association_setup_request", PFCPAssociationSetupRequest, 5, 2,
    [node_v4("10.0.0.1"), rts(TS)])
msg("association_setup_response", PFCPAssociationSetupResponse, 6, 2,
    [node_fqdn("upf1.example.org"), cause(1), rts(TS),
     bitmap(IE_UPFunctionFeatures(FTUP=1, BUCP=1, EMPU=1), 43)])
msg("association_update_request", PFCPAssociationUpdateRequest, 7, 3, [node_v6("2001:db8::1")])
msg("association_update_response", PFCPAssociationUpdateResponse, 8, 3,
    [node_v4("10.0.0.2"), cause(1)])
msg("association_release_request", PFCPAssociationReleaseRequest, 9, 4, [node_v4("10.0.0.1")])
msg("association_release_response", PFCPAssociationReleaseResponse, 10, 4,
    [node_v4("10.0.0.2"), cause(1)])
msg("node_report_request", PFCPNodeReportRequest, 12, 5, [
    node_v4("10.0.0.2"),
    bitmap(IE_NodeReportType(UPFR=1), 101),
    grp(IE_UserPlanePathFailureReport, 102, [
        leaf(IE_RemoteGTP_U_Peer(V4=1, ipv4="192.168.1.10"), 103,
             {"ipv4": "192.168.1.10", "ipv6": None, "di": None, "ni": None}),
        leaf(IE_RemoteGTP_U_Peer(V6=1, ipv6="2001:db8:3::10"), 103,
             {"ipv4": None, "ipv6": "2001:db8:3::10", "di": None, "ni": None}),
    ]),
])
msg("node_report_response", PFCPNodeReportResponse, 13, 5, [node_v4("10.0.0.1"), cause(1)])
msg("session_establishment_request", PFCPSessionEstablishmentRequest, 50, 10, [
    node_v4("10.0.0.1"),
    fseid(0x1111, v4="10.0.0.1"),
    create_pdr(1, 0, 1, [fteid_ch(1), netinst("internet"), ueip("10.60.0.1", 0),
                         sdf("permit out ip from any to assigned"), qfi(9)]),
    create_pdr(2, 1, 2, [ueip("10.60.0.1", 1)]),
    create_far(1, [dst_if(1)]),
    create_far(2, [dst_if(0), netinst("access"), ohc_gtpu_v4(0x1234, "192.168.1.10")]),
    create_urr(),
    create_qer(),
    grp(IE_Create_BAR, 85, [bar_id(1)]),
], seid=0)
msg("session_establishment_response", PFCPSessionEstablishmentResponse, 51, 10, [
    node_v4("10.0.0.2"), cause(1), fseid(0x2222, v4="10.0.0.2", v6="2001:db8::2"),
    grp(IE_CreatedPDR, 8, [pdr_id(1), fteid(0x80000001, "10.0.0.2")]),
], seid=0x1111)
msg("session_modification_request", PFCPSessionModificationRequest, 52, 11, [
    fseid(0x1111, v4="10.0.0.1"),
    grp(IE_RemovePDR, 15, [pdr_id(3)]),
    grp(IE_RemoveFAR, 16, [far_id(3)]),
    grp(IE_RemoveURR, 17, [urr_id(3)]),
    grp(IE_RemoveQER, 18, [qer_id(3)]),
    grp(IE_Remove_BAR, 87, [bar_id(1)]),
    grp(IE_UpdatePDR, 9, [pdr_id(2), prec(100)]),
    grp(IE_UpdateFAR, 10, [far_id(2), apply_drop_nocp(),
                           grp(IE_UpdateForwardingParameters, 11,
                               [dst_if(0), ohc_gtpu_v4(0x5678, "192.168.1.11"),
                                bitmap(IE_PFCPSMReqFlags(SNDEM=1), 49)])]),
    grp(IE_UpdateURR, 13, [urr_id(1), tthresh(60), leaf(IE_TimeQuota(quota=3600), 74, 3600)]),
    grp(IE_UpdateQER, 14, [qer_id(1), gate(1, 1)]),
    bitmap(IE_PFCPSMReqFlags(QUARR=1), 49),
    leaf(IE_QueryURRReference(reference=0x77), 125, 0x77),
], seid=0x2222)
msg("session_modification_response", PFCPSessionModificationResponse, 53, 11, [
    cause(1), usage_report(IE_UsageReport_SMR, 78),
], seid=0x1111)
msg("session_deletion_request", PFCPSessionDeletionRequest, 54, 12, [], seid=0x2222)
msg("session_deletion_response", PFCPSessionDeletionResponse, 55, 12, [
    cause(1), usage_report(IE_UsageReport_SDR, 79),
], seid=0x1111)
msg("session_report_request", PFCPSessionReportRequest, 56, 13, [
    bitmap(IE_ReportType(DLDR=1, USAR=1), 39),
    grp(IE_DownlinkDataReport, 83, [pdr_id(2)]),
    usage_report(IE_UsageReport_SRR, 80),
], seid=0x1111)
msg("session_report_response", PFCPSessionReportResponse, 57, 13, [
    cause(69), offending(39),
], seid=0x2222)

for m in MSGS:
    print(json.dumps(m))
