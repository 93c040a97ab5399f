#!/usr/bin/env python3
"""Write the seed inputs of the `node` target into seeds/ (Scapy's PFCP layer builds the
messages, as the SMF simulator does). Mode byte 0: one datagram; mode byte 1: a sequence of
[flags][len u16 BE][datagram] (see fuzz_targets/node.rs). The target's node has sessions with
UP SEIDs 1, 2, 3 and CP SEIDs 0x100-0x102."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../tests/smf"))
from scapy.contrib.pfcp import *  # noqa: E402,F401,F403
import smf_sim  # noqa: E402

smf = smf_sim.Smf(("127.0.0.1", 9), "10.60.0.1", "192.168.1.10", "192.168.1.11", 100000, 1, 8, 1.0)


def pfcp(seq, body, seid=None):
    return bytes(PFCP(version=1, S=0 if seid is None else 1, seq=seq, seid=seid or 0) / body)


msgs = {
    "heartbeat_request": pfcp(100, PFCPHeartbeatRequest(IE_list=[IE_RecoveryTimeStamp(timestamp=7)])),
    "heartbeat_response": pfcp(1, PFCPHeartbeatResponse(IE_list=[IE_RecoveryTimeStamp(timestamp=7)])),
    "association_setup": pfcp(101, PFCPAssociationSetupRequest(IE_list=[
        smf.node_id(), IE_RecoveryTimeStamp(timestamp=0xE6F00002)])),
    "association_update": pfcp(102, PFCPAssociationUpdateRequest(IE_list=[smf.node_id()])),
    "association_release": pfcp(103, PFCPAssociationReleaseRequest(IE_list=[smf.node_id()])),
    "establishment": pfcp(104, smf.establishment(0x200, 7), seid=0),
    "modification": pfcp(105, smf.modification(0x100, 1), seid=1),
    "modification_remove_urr": pfcp(106, PFCPSessionModificationRequest(IE_list=[
        IE_RemoveURR(IE_list=[IE_URR_Id(id=1)])]), seid=2),
    "modification_query_urr": pfcp(107, PFCPSessionModificationRequest(IE_list=[
        IE_QueryURR(IE_list=[IE_URR_Id(id=1)])]), seid=3),
    "deletion": pfcp(108, PFCPSessionDeletionRequest(IE_list=[]), seid=2),
    "report_response": pfcp(1, PFCPSessionReportResponse(IE_list=[IE_Cause(cause=1)]), seid=0x100),
}
out = os.path.join(os.path.dirname(__file__), "seeds")
os.makedirs(out, exist_ok=True)
for name, m in msgs.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"\0" + m)


def seq(*items):
    b = b"\1"
    for flags, m in items:
        b += bytes([flags]) + struct.pack(">H", len(m)) + m
    return b


chains = {
    "chain_establish_modify_delete": seq((0, msgs["establishment"]), (2, msgs["modification"]),
                                         (0, msgs["deletion"]), (0, msgs["deletion"])),
    "chain_unassociated_peer": seq((1, msgs["establishment"]), (1, msgs["association_setup"]),
                                   (1, msgs["establishment"])),
    "chain_timers_release": seq((254, msgs["heartbeat_request"]), (254, msgs["heartbeat_response"]),
                                (254, b""), (0, msgs["association_release"]), (0, msgs["modification"])),
    "chain_setup_again": seq((0, msgs["association_setup"]), (0, msgs["modification_query_urr"])),
}
for name, b in chains.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(b)
print(f"{len(msgs) + len(chains)} seeds")
