"""What the live-UPF scripts run in the gNB namespace share (gnb_dn.py, frag_gnb.py):
entering the data network's namespace with setns(2), so that one process sees both sides of
the UPF, and the UDP ports of the traffic they send.
"""
import ctypes
import os

ETH_P_ALL = 3
CLONE_NEWNET = 0x40000000
DN_PORT = 7000
UE_PORT = 6000


def setns(path):
    """Move this thread into the network namespace at `path` (e.g. /run/netns/NAME)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {path}")
    finally:
        os.close(fd)
