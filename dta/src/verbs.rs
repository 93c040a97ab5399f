//! The collector's side of the RoCEv2 output on a real RDMA NIC (feature `verbs`): rdma-core's
//! libibverbs through a minimal FFI binding. The collector registers its region as a memory
//! region (remote write and remote atomic) and creates one Reliable Connection queue pair
//! per translator worker, connected to that worker's queue pair; the translator needs the
//! numbers back ([`Connection`]: QPs, R_Key, the region's VA), exchanged out of band
//! (docs/dta.md "RoCEv2 output": a JSON file the operator copies into
//! `[dta_translator.rocev2]`). No RDMA_CM: the addresses are configured.
//!
//! The NIC then writes into the region itself: the collector's CPU does nothing per report
//! (the seed's point), and `Collector` reads the region as usual.
//!
//! Struct layouts follow rdma-core's `<infiniband/verbs.h>` (checked against rdma-core 44's
//! header with a C compiler: sizes and offsets are asserted below). Only exported functions
//! are called (not the header's inline wrappers), each block with its `// SAFETY:`.

use crate::region::Region;
use std::ffi::{c_int, c_void, CStr};
use std::net::Ipv4Addr;
use std::sync::Arc;

#[allow(non_camel_case_types)]
mod ffi {
    use std::ffi::{c_char, c_int, c_uint, c_void};

    /// Opaque handles.
    #[repr(C)]
    pub struct ibv_device {
        _p: [u8; 0],
    }
    #[repr(C)]
    pub struct ibv_context {
        _p: [u8; 0],
    }
    #[repr(C)]
    pub struct ibv_pd {
        _p: [u8; 0],
    }
    #[repr(C)]
    pub struct ibv_cq {
        _p: [u8; 0],
    }

    #[repr(C)]
    pub struct ibv_mr {
        pub context: *mut ibv_context,
        pub pd: *mut ibv_pd,
        pub addr: *mut c_void,
        pub length: usize,
        pub handle: u32,
        pub lkey: u32,
        pub rkey: u32,
    }

    /// `struct ibv_qp`: only its head is read (`qp_num` at 52).
    #[repr(C)]
    pub struct ibv_qp {
        pub head: [u8; 52],
        pub qp_num: u32,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    pub struct ibv_qp_cap {
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
    }

    #[repr(C)]
    pub struct ibv_qp_init_attr {
        pub qp_context: *mut c_void,
        pub send_cq: *mut ibv_cq,
        pub recv_cq: *mut ibv_cq,
        pub srq: *mut c_void,
        pub cap: ibv_qp_cap,
        pub qp_type: c_int,
        pub sq_sig_all: c_int,
    }

    /// `union ibv_gid` holds two `__be64`: 8-byte aligned.
    #[repr(C, align(8))]
    #[derive(Clone, Copy, Default)]
    pub struct ibv_global_route {
        pub dgid: [u8; 16],
        pub flow_label: u32,
        pub sgid_index: u8,
        pub hop_limit: u8,
        pub traffic_class: u8,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    pub struct ibv_ah_attr {
        pub grh: ibv_global_route,
        pub dlid: u16,
        pub sl: u8,
        pub src_path_bits: u8,
        pub static_rate: u8,
        pub is_global: u8,
        pub port_num: u8,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    pub struct ibv_qp_attr {
        pub qp_state: c_int,
        pub cur_qp_state: c_int,
        pub path_mtu: c_int,
        pub path_mig_state: c_int,
        pub qkey: u32,
        pub rq_psn: u32,
        pub sq_psn: u32,
        pub dest_qp_num: u32,
        pub qp_access_flags: c_uint,
        pub cap: ibv_qp_cap,
        pub ah_attr: ibv_ah_attr,
        pub alt_ah_attr: ibv_ah_attr,
        pub pkey_index: u16,
        pub alt_pkey_index: u16,
        pub en_sqd_async_notify: u8,
        pub sq_draining: u8,
        pub max_rd_atomic: u8,
        pub max_dest_rd_atomic: u8,
        pub min_rnr_timer: u8,
        pub port_num: u8,
        pub timeout: u8,
        pub retry_cnt: u8,
        pub rnr_retry: u8,
        pub alt_port_num: u8,
        pub alt_timeout: u8,
        pub rate_limit: u32,
    }

    // Sizes and offsets as rdma-core 44's header has them (gcc, x86-64).
    const _: () = assert!(std::mem::size_of::<ibv_mr>() == 48);
    const _: () = assert!(std::mem::offset_of!(ibv_mr, rkey) == 40);
    const _: () = assert!(std::mem::offset_of!(ibv_qp, qp_num) == 52);
    const _: () = assert!(std::mem::size_of::<ibv_qp_init_attr>() == 64);
    const _: () = assert!(std::mem::offset_of!(ibv_qp_init_attr, qp_type) == 52);
    const _: () = assert!(std::mem::size_of::<ibv_global_route>() == 24);
    const _: () = assert!(std::mem::size_of::<ibv_ah_attr>() == 32);
    const _: () = assert!(std::mem::offset_of!(ibv_ah_attr, is_global) == 29);
    const _: () = assert!(std::mem::size_of::<ibv_qp_attr>() == 144);
    const _: () = assert!(std::mem::align_of::<ibv_qp_attr>() == 8);
    const _: () = assert!(std::mem::offset_of!(ibv_qp_attr, ah_attr) == 56);
    const _: () = assert!(std::mem::offset_of!(ibv_qp_attr, pkey_index) == 120);
    const _: () = assert!(std::mem::offset_of!(ibv_qp_attr, max_rd_atomic) == 126);
    const _: () = assert!(std::mem::offset_of!(ibv_qp_attr, timeout) == 130);
    const _: () = assert!(std::mem::offset_of!(ibv_qp_attr, rate_limit) == 136);

    pub const IBV_QPT_RC: c_int = 2;
    pub const IBV_QPS_INIT: c_int = 1;
    pub const IBV_QPS_RTR: c_int = 2;
    pub const IBV_QPS_RTS: c_int = 3;
    pub const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
    pub const IBV_ACCESS_REMOTE_WRITE: c_int = 2;
    pub const IBV_ACCESS_REMOTE_ATOMIC: c_int = 8;
    pub const IBV_QP_STATE: c_int = 1;
    pub const IBV_QP_ACCESS_FLAGS: c_int = 8;
    pub const IBV_QP_PKEY_INDEX: c_int = 16;
    pub const IBV_QP_PORT: c_int = 32;
    pub const IBV_QP_AV: c_int = 128;
    pub const IBV_QP_PATH_MTU: c_int = 256;
    pub const IBV_QP_TIMEOUT: c_int = 512;
    pub const IBV_QP_RETRY_CNT: c_int = 1024;
    pub const IBV_QP_RNR_RETRY: c_int = 2048;
    pub const IBV_QP_RQ_PSN: c_int = 4096;
    pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 8192;
    pub const IBV_QP_MIN_RNR_TIMER: c_int = 32768;
    pub const IBV_QP_SQ_PSN: c_int = 65536;
    pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 131072;
    pub const IBV_QP_DEST_QPN: c_int = 1048576;
    /// `IBV_MTU_1024`: every RoCE NIC runs it; our largest WRITE is 256 bytes.
    pub const IBV_MTU_1024: c_int = 3;

    #[link(name = "ibverbs")]
    extern "C" {
        pub fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device;
        pub fn ibv_free_device_list(list: *mut *mut ibv_device);
        pub fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char;
        pub fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context;
        pub fn ibv_close_device(ctx: *mut ibv_context) -> c_int;
        pub fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd;
        pub fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int;
        pub fn ibv_reg_mr(
            pd: *mut ibv_pd,
            addr: *mut c_void,
            len: usize,
            access: c_int,
        ) -> *mut ibv_mr;
        pub fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int;
        pub fn ibv_create_cq(
            ctx: *mut ibv_context,
            cqe: c_int,
            cq_context: *mut c_void,
            channel: *mut c_void,
            comp_vector: c_int,
        ) -> *mut ibv_cq;
        pub fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int;
        pub fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp;
        pub fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int;
        pub fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int;
    }
}

/// A verbs call failed: which, and the errno it left.
#[derive(Debug, thiserror::Error)]
pub enum VerbsError {
    #[error("no RDMA device")]
    NoDevice,
    #[error("no RDMA device named {0}")]
    UnknownDevice(String),
    #[error("{call} failed: {err}")]
    Call {
        call: &'static str,
        #[source]
        err: std::io::Error,
    },
}

fn last(call: &'static str) -> VerbsError {
    VerbsError::Call {
        call,
        err: std::io::Error::last_os_error(),
    }
}

fn ret(call: &'static str, rc: c_int) -> Result<(), VerbsError> {
    match rc {
        0 => Ok(()),
        // The modify / destroy calls return the errno itself.
        e => Err(VerbsError::Call {
            call,
            err: std::io::Error::from_raw_os_error(e.abs()),
        }),
    }
}

/// The RDMA devices `ibv_get_device_list` finds (empty without one, or without the
/// kernel's RDMA modules).
pub fn devices() -> Vec<String> {
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid out-pointer; the list (or null) is freed below, and the names
    // are copied out before that.
    unsafe {
        let list = ffi::ibv_get_device_list(&mut n);
        if list.is_null() {
            return Vec::new();
        }
        let names = (0..n.max(0) as usize)
            .filter_map(|i| {
                let d = *list.add(i);
                let p = ffi::ibv_get_device_name(d);
                (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
            })
            .collect();
        ffi::ibv_free_device_list(list);
        names
    }
}

/// The translator side as the collector must know it: where its requests come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The translator's `source_ip`: RoCEv2 addresses it by the IPv4-mapped GID.
    pub ip: Ipv4Addr,
    /// `[dta_translator.rocev2] local_qp`: worker `w` sends from `local_qp + w`.
    pub local_qp: u32,
    /// Translator workers: one QP each.
    pub workers: u32,
    /// `first_psn`: the PSN our QPs expect first.
    pub first_psn: u32,
}

/// What the translator's `[dta_translator.rocev2]` needs back (out of band).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Connection {
    /// The collector's QP per translator worker (`qp = [...]`).
    pub qp: Vec<u32>,
    pub rkey: u32,
    /// The region's first byte in the collector's address space (`base_va`).
    pub base_va: u64,
    pub local_qp: u32,
    pub first_psn: u32,
}

/// Local port settings of the NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortConfig {
    /// The HCA port (1-based).
    pub port: u8,
    /// The GID table index of the collector's RoCEv2 IPv4 address (`show_gids`).
    pub gid_index: u8,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            port: 1,
            gid_index: 3,
        }
    }
}

/// An opened NIC with the collector's region registered and QPs toward one translator.
/// Dropping it tears everything down (the region stays mapped: `Arc<Region>`).
#[derive(Debug)]
pub struct Responder {
    ctx: *mut ffi::ibv_context,
    pd: *mut ffi::ibv_pd,
    cq: *mut ffi::ibv_cq,
    mr: *mut ffi::ibv_mr,
    qps: Vec<*mut ffi::ibv_qp>,
    port: PortConfig,
    region: Arc<Region>,
}

// SAFETY: the verbs objects are used from one thread at a time (`&mut self`); libibverbs
// objects may be used from any thread.
unsafe impl Send for Responder {}

impl Responder {
    /// Open `device` (or the first one), register `region` for remote write and atomics.
    pub fn open(
        device: Option<&str>,
        port: PortConfig,
        region: Arc<Region>,
    ) -> Result<Responder, VerbsError> {
        let mut n: c_int = 0;
        // SAFETY: as in `devices`; the device pointer is used (to open it) before the list
        // is freed, and the context stays valid after (rdma-core keeps the device alive).
        let ctx = unsafe {
            let list = ffi::ibv_get_device_list(&mut n);
            if list.is_null() || n <= 0 {
                if !list.is_null() {
                    ffi::ibv_free_device_list(list);
                }
                return Err(VerbsError::NoDevice);
            }
            let mut pick = None;
            for i in 0..n as usize {
                let d = *list.add(i);
                let name = CStr::from_ptr(ffi::ibv_get_device_name(d)).to_string_lossy();
                if device.is_none_or(|want| want == name) {
                    pick = Some(d);
                    break;
                }
            }
            let ctx = pick.map(|d| ffi::ibv_open_device(d));
            ffi::ibv_free_device_list(list);
            match ctx {
                None => {
                    return Err(VerbsError::UnknownDevice(
                        device.unwrap_or_default().to_string(),
                    ))
                }
                Some(c) if c.is_null() => return Err(last("ibv_open_device")),
                Some(c) => c,
            }
        };
        let mut r = Responder {
            ctx,
            pd: std::ptr::null_mut(),
            cq: std::ptr::null_mut(),
            mr: std::ptr::null_mut(),
            qps: Vec::new(),
            port,
            region,
        };
        // SAFETY: `ctx` is an open context; each result is checked before use and released
        // in `Drop` (which skips null handles).
        unsafe {
            r.pd = ffi::ibv_alloc_pd(r.ctx);
            if r.pd.is_null() {
                return Err(last("ibv_alloc_pd"));
            }
            r.cq = ffi::ibv_create_cq(r.ctx, 16, std::ptr::null_mut(), std::ptr::null_mut(), 0);
            if r.cq.is_null() {
                return Err(last("ibv_create_cq"));
            }
            let (base, len) = r.region.raw();
            r.mr = ffi::ibv_reg_mr(
                r.pd,
                base.cast::<c_void>(),
                len,
                ffi::IBV_ACCESS_LOCAL_WRITE
                    | ffi::IBV_ACCESS_REMOTE_WRITE
                    | ffi::IBV_ACCESS_REMOTE_ATOMIC,
            );
            if r.mr.is_null() {
                return Err(last("ibv_reg_mr"));
            }
        }
        Ok(r)
    }

    /// One RC QP per translator worker, moved to INIT, RTR (toward the worker's QP, from
    /// `peer.first_psn`) and RTS. Returns what the translator's configuration needs.
    pub fn connect(&mut self, peer: &Peer) -> Result<Connection, VerbsError> {
        let mut qpns = Vec::new();
        for w in 0..peer.workers {
            let qp = self.create_qp()?;
            self.qps.push(qp);
            self.to_rts(qp, peer, peer.local_qp + w)?;
            // SAFETY: `qp` was created above and is live until `Drop`.
            qpns.push(unsafe { (*qp).qp_num });
        }
        // SAFETY: `mr` is live (registered in `open`).
        let (rkey, addr) = unsafe { ((*self.mr).rkey, (*self.mr).addr as u64) };
        Ok(Connection {
            qp: qpns,
            rkey,
            base_va: addr,
            local_qp: peer.local_qp,
            first_psn: peer.first_psn,
        })
    }

    fn create_qp(&mut self) -> Result<*mut ffi::ibv_qp, VerbsError> {
        let mut a = ffi::ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq: self.cq,
            recv_cq: self.cq,
            srq: std::ptr::null_mut(),
            cap: ffi::ibv_qp_cap {
                max_send_wr: 1,
                max_recv_wr: 1,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: ffi::IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: `pd` and `cq` are live; `a` is a valid init attribute for the call.
        let qp = unsafe { ffi::ibv_create_qp(self.pd, &mut a) };
        if qp.is_null() {
            return Err(last("ibv_create_qp"));
        }
        Ok(qp)
    }

    fn to_rts(&self, qp: *mut ffi::ibv_qp, peer: &Peer, dest: u32) -> Result<(), VerbsError> {
        let modify = |a: &mut ffi::ibv_qp_attr, mask: c_int, call| {
            // SAFETY: `qp` is live; `a` is a valid attribute struct whose fields in `mask`
            // are set.
            ret(call, unsafe { ffi::ibv_modify_qp(qp, a, mask) })
        };
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::IBV_QPS_INIT,
            pkey_index: 0,
            port_num: self.port.port,
            qp_access_flags: (ffi::IBV_ACCESS_REMOTE_WRITE | ffi::IBV_ACCESS_REMOTE_ATOMIC) as u32,
            ..Default::default()
        };
        modify(
            &mut a,
            ffi::IBV_QP_STATE
                | ffi::IBV_QP_PKEY_INDEX
                | ffi::IBV_QP_PORT
                | ffi::IBV_QP_ACCESS_FLAGS,
            "ibv_modify_qp(INIT)",
        )?;
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::IBV_QPS_RTR,
            path_mtu: ffi::IBV_MTU_1024,
            dest_qp_num: dest,
            rq_psn: peer.first_psn,
            max_dest_rd_atomic: 16,
            min_rnr_timer: 12,
            ah_attr: ffi::ibv_ah_attr {
                grh: ffi::ibv_global_route {
                    dgid: peer.ip.to_ipv6_mapped().octets(),
                    sgid_index: self.port.gid_index,
                    hop_limit: 64,
                    ..Default::default()
                },
                is_global: 1,
                port_num: self.port.port,
                ..Default::default()
            },
            ..Default::default()
        };
        modify(
            &mut a,
            ffi::IBV_QP_STATE
                | ffi::IBV_QP_AV
                | ffi::IBV_QP_PATH_MTU
                | ffi::IBV_QP_DEST_QPN
                | ffi::IBV_QP_RQ_PSN
                | ffi::IBV_QP_MAX_DEST_RD_ATOMIC
                | ffi::IBV_QP_MIN_RNR_TIMER,
            "ibv_modify_qp(RTR)",
        )?;
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::IBV_QPS_RTS,
            sq_psn: 0,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 1,
            ..Default::default()
        };
        modify(
            &mut a,
            ffi::IBV_QP_STATE
                | ffi::IBV_QP_SQ_PSN
                | ffi::IBV_QP_TIMEOUT
                | ffi::IBV_QP_RETRY_CNT
                | ffi::IBV_QP_RNR_RETRY
                | ffi::IBV_QP_MAX_QP_RD_ATOMIC,
            "ibv_modify_qp(RTS)",
        )
    }

    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        // SAFETY: each handle was created by this responder and is released once, in the
        // reverse order of creation; null handles (a failed `open`) are skipped.
        unsafe {
            for qp in self.qps.drain(..) {
                ffi::ibv_destroy_qp(qp);
            }
            if !self.mr.is_null() {
                ffi::ibv_dereg_mr(self.mr);
            }
            if !self.cq.is_null() {
                ffi::ibv_destroy_cq(self.cq);
            }
            if !self.pd.is_null() {
                ffi::ibv_dealloc_pd(self.pd);
            }
            ffi::ibv_close_device(self.ctx);
        }
    }
}
