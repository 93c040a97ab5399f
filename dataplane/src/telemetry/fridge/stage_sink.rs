//! The fridge stage's view of a packet ([`Frame`]) and the stage as the matcher's
//! [`RoleSink`] for one packet ([`Sink`]): a child of `stage`, so it reaches the stage's
//! routes and `role`.

use super::{FridgeStage, Kind, PacketBuf, PacketMeta, Role, RoleSink};

/// The stage as the matcher's [`RoleSink`] for one packet.
pub(super) struct Sink<'a, F: Frame + ?Sized> {
    pub(super) st: &'a mut FridgeStage,
    /// The packet's rx port is an uplink port ([`FridgeStage::rx_up`]).
    pub(super) rx_up: bool,
    /// Its [`PacketMeta::dir`] byte.
    pub(super) dir: u8,
    /// Where a packet of known kind and direction ([`FridgeStage::observe_plain_dns`])
    /// sends its roles: the routes of a response and a request, read once per batch.
    pub(super) fixed: Option<[u32; 2]>,
    /// The bytes the matcher reads (the frame, or the prefix the usual records need).
    pub(super) data: &'a [u8],
    /// The packet, whose record a role reads only off the common path ([`FridgeStage::scan`]).
    pub(super) frame: &'a F,
    pub(super) now_ns: u64,
}

impl<'a> Sink<'a, Bytes<'a>> {
    /// The sink of a packet given as its bytes and record (`frame`: the general path's,
    /// [`FridgeStage::observe_general`] and [`FridgeStage::observe_other`]): routes by the
    /// record's direction byte, none fixed.
    #[inline(always)]
    pub(super) fn of_bytes(
        st: &'a mut FridgeStage,
        rx_up: bool,
        frame: &'a Bytes<'a>,
        now_ns: u64,
    ) -> Self {
        Sink {
            st,
            rx_up,
            dir: frame.m.dir,
            fixed: None,
            data: frame.data,
            frame,
            now_ns,
        }
    }
}

impl<F: Frame + ?Sized> RoleSink for Sink<'_, F> {
    #[inline(always)]
    fn role(&mut self, r: Role) {
        // The kind and the request flag are constants where the matcher hands a role over:
        // the route is one load at the direction byte (none when the batch has read it).
        let route = match self.fixed {
            Some(f) => {
                debug_assert_eq!(r.kind, Kind::Dns, "fixed routes are DNS routes");
                f[usize::from(r.request)]
            }
            None => {
                self.st.routes[usize::from(self.rx_up)][r.kind as usize][usize::from(r.request)]
                    [usize::from(self.dir)]
            }
        };
        self.st.role(r, route, self.data, self.frame, self.now_ns);
    }
}

/// A packet as the stage reads it: a fixed-offset prefix with one length check (the usual
/// records' headers: [`PacketBuf::head`] for a buffer), else the whole frame, and its record.
pub(super) trait Frame {
    fn head(&self, n: usize) -> Option<&[u8]>;
    fn bytes(&self) -> &[u8];
    fn meta(&self) -> &PacketMeta;
}

/// A packet given as its bytes and record ([`FridgeStage::observe`]).
pub(super) struct Bytes<'a> {
    pub(super) data: &'a [u8],
    pub(super) m: &'a PacketMeta,
}

impl Frame for Bytes<'_> {
    #[inline(always)]
    fn head(&self, n: usize) -> Option<&[u8]> {
        self.data.get(..n)
    }
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        self.data
    }
    #[inline(always)]
    fn meta(&self) -> &PacketMeta {
        self.m
    }
}

impl<B: PacketBuf> Frame for B {
    #[inline(always)]
    fn head(&self, n: usize) -> Option<&[u8]> {
        PacketBuf::head(self, n)
    }
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        self.data()
    }
    #[inline(always)]
    fn meta(&self) -> &PacketMeta {
        self.pkt_meta()
    }
}
