//! Planning one session: its PDRs, FARs, QERs and URRs translated into the compiled pieces,
//! table keys and slot changes of a [`Plan`], checked before anything changes (the
//! mapping in the module doc of `super`).

use super::*;

/// The highest Destination Interface value TS 29.244 section 8.2.24 defines (5: 5G VN
/// Internal); 6-15 are spare.
const MAX_DESTINATION_INTERFACE: u8 = 5;

impl Compiler {
    /// Local outer source of family `v6`, preferring an address of the session's F-TEIDs.
    fn local_addr(&self, s: &Session, v6: bool) -> Option<IpAddr> {
        let fteids = || s.pdrs.values().filter_map(|p| p.pdi.f_teid);
        if v6 {
            fteids()
                .filter_map(|f| f.ipv6)
                .find(|a| self.cfg.local_v6.contains(a))
                .or_else(|| self.cfg.local_v6.first().copied())
                .map(IpAddr::V6)
        } else {
            fteids()
                .filter_map(|f| f.ipv4)
                .find(|a| self.cfg.local_v4.contains(a))
                .or_else(|| self.cfg.local_v4.first().copied())
                .map(IpAddr::V4)
        }
    }

    fn compile_far(&self, s: &Session, far: &peregrine_n4::Far) -> Result<FarRule, CompileError> {
        let far_id = far.id;
        let bits = far.apply_action.0;
        let bad = || {
            CompileError::rule(
                t::APPLY_ACTION,
                CompileErrorKind::ApplyAction { far_id, bits },
            )
        };
        if bits & aa::DUPL != 0 {
            return Err(bad());
        }
        let action = match bits & (aa::DROP | aa::FORW | aa::BUFF) {
            aa::DROP => FarAction::Drop,
            aa::FORW => FarAction::Forward,
            aa::BUFF => FarAction::Buffer {
                notify_cp: bits & aa::NOCP != 0,
            },
            _ => return Err(bad()),
        };
        let fp = far.forwarding.as_ref();
        // Values 6-15 are spare (TS 29.244 section 8.2.24): the IE is incorrect, not a rule
        // we cannot build (section 7.2.2.4.2: cause 69 with the Offending IE).
        if let Some(f) = fp.filter(|f| f.destination_interface > MAX_DESTINATION_INTERFACE) {
            return Err(CompileError {
                cause: cause::MANDATORY_IE_INCORRECT,
                offending_ie: Some(t::DESTINATION_INTERFACE),
                kind: CompileErrorKind::DestinationInterface {
                    far_id,
                    value: f.destination_interface,
                },
            });
        }
        if action == FarAction::Forward && fp.is_none() {
            return Err(CompileError {
                cause: cause::CONDITIONAL_IE_MISSING,
                offending_ie: Some(t::FORWARDING_PARAMETERS),
                kind: CompileErrorKind::NoForwardingParameters { far_id },
            });
        }
        let outer = match fp.and_then(|f| f.outer_header_creation) {
            None => None,
            Some(o) => {
                let bad = || {
                    CompileError::rule(
                        t::OUTER_HEADER_CREATION,
                        CompileErrorKind::OuterHeaderCreation {
                            far_id,
                            description: o.description,
                        },
                    )
                };
                if o.description & !ohc::TEID_PRESENT != 0 {
                    return Err(bad());
                }
                let teid = o.teid.ok_or_else(bad)?;
                // Both flags (dual-stack peer): IPv4 if we have an IPv4 address.
                let want_v4 = o.description & ohc::GTPU_UDP_IPV4 != 0
                    && o.ipv4.is_some()
                    && (o.description & ohc::GTPU_UDP_IPV6 == 0 || !self.cfg.local_v4.is_empty());
                let (peer, v6) = match (want_v4, o.ipv4, o.ipv6) {
                    (true, Some(a), _) => (IpAddr::V4(a), false),
                    (false, _, Some(a)) if o.description & ohc::GTPU_UDP_IPV6 != 0 => {
                        (IpAddr::V6(a), true)
                    }
                    _ => return Err(bad()),
                };
                let local = self.local_addr(s, v6).ok_or(CompileError::rule(
                    t::OUTER_HEADER_CREATION,
                    CompileErrorKind::NoLocalAddress {
                        far_id,
                        family: if v6 { "IPv6" } else { "IPv4" },
                    },
                ))?;
                Some(OuterHeader { teid, peer, local })
            }
        };
        let dst_iface = match fp {
            Some(f) => f.destination_interface,
            // DROP / BUFF without forwarding parameters: nothing leaves an interface.
            None => iface::CP_FUNCTION,
        };
        Ok(FarRule {
            far_id,
            action,
            dst_iface,
            outer,
        })
    }

    /// Validate and compile `s`, and work out its slot changes against the current state.
    pub(super) fn plan(&self, s: &Session) -> Result<Plan, CompileError> {
        let seid = s.up_seid;
        let old = self.sessions.get(&seid);
        let mut fars = Vec::with_capacity(s.fars.len());
        for far in s.fars.values() {
            fars.push(self.compile_far(s, far)?);
        }
        let mut pdrs = Vec::with_capacity(s.pdrs.len());
        let mut qers: Vec<CQer> = Vec::new();
        let mut meters = SlotDelta::default();
        let mut urrs = SlotDelta::default();
        // URR slots: keep the session's existing ones, peek new ones.
        let mut urr_slots = Vec::with_capacity(s.urrs.len());
        for &id in s.urrs.keys() {
            let slot = match old.and_then(|o| o.urrs().find(|u| u.0 == id)) {
                Some((_, slot)) => slot,
                None => {
                    if urrs.new as u64 >= self.urr_slots.available() {
                        return Err(CompileError {
                            cause: cause::NO_RESOURCES_AVAILABLE,
                            offending_ie: Some(t::URR_ID),
                            kind: CompileErrorKind::UrrSlotsExhausted,
                        });
                    }
                    urrs.new += 1;
                    self.urr_slots.peek(urrs.new - 1).slot
                }
            };
            urr_slots.push((id, slot));
        }
        if let Some(o) = old {
            urrs.freed = o
                .urrs()
                .filter(|u| !s.urrs.contains_key(&u.0))
                .map(|u| u.1)
                .collect();
        }
        for p in s.pdrs.values() {
            let pdr_id = p.id;
            let pdi = &p.pdi;
            let (direction, keys) = match (pdi.source_interface, pdi.f_teid) {
                (iface::ACCESS, Some(f)) => (Direction::Uplink, vec![Key::Teid(f.teid)]),
                (iface::CORE, Some(f)) => (Direction::Downlink, vec![Key::Teid(f.teid)]),
                (iface::CORE | iface::SGI_LAN, None) => {
                    let mut k = Vec::new();
                    if let Some(u) = pdi.ue_ip {
                        if let Some(a) = u.ipv4 {
                            k.push(Key::UeV4(u32::from(a)));
                        }
                        if let Some(a) = u.ipv6 {
                            k.push(Key::UeV6((u128::from(a) >> 64) as u64));
                        }
                    }
                    if k.is_empty() {
                        return Err(CompileError::rule(
                            t::UE_IP_ADDRESS,
                            CompileErrorKind::NoLookupKey { pdr_id },
                        ));
                    }
                    (Direction::Downlink, k)
                }
                (iface::ACCESS, None) => {
                    return Err(CompileError::rule(
                        t::F_TEID,
                        CompileErrorKind::NoLookupKey { pdr_id },
                    ))
                }
                // Packets the CP function sends us are not looked up in these tables.
                (iface::CP_FUNCTION, _) => (Direction::Uplink, Vec::new()),
                (value, _) => {
                    return Err(CompileError::rule(
                        t::SOURCE_INTERFACE,
                        CompileErrorKind::SourceInterface { pdr_id, value },
                    ))
                }
            };
            for &k in &keys {
                if let Some(owner) = self.owners.get(k) {
                    if owner != seid {
                        let ie = if matches!(k, Key::Teid(_)) {
                            t::F_TEID
                        } else {
                            t::UE_IP_ADDRESS
                        };
                        return Err(CompileError::rule(
                            ie,
                            CompileErrorKind::KeyInUse { pdr_id, owner },
                        ));
                    }
                }
            }
            let remove_gtpu = match p.outer_header_removal {
                None => false,
                Some(o) if matches!(o.description, 0 | 1 | 6) => true,
                Some(o) => {
                    return Err(CompileError::rule(
                        t::OUTER_HEADER_REMOVAL,
                        CompileErrorKind::OuterHeaderRemoval {
                            pdr_id,
                            description: o.description,
                        },
                    ))
                }
            };
            let mut filters = Vec::new();
            for f in &pdi.sdf_filters {
                let fd = match (
                    &f.flow_description,
                    f.tos_traffic_class,
                    f.spi,
                    f.flow_label,
                ) {
                    (Some(fd), None, None, None) => fd,
                    _ => {
                        return Err(CompileError::rule(
                            t::SDF_FILTER,
                            CompileErrorKind::SdfUnsupported { pdr_id },
                        ))
                    }
                };
                let d = sdf::FlowDescription::parse(fd).map_err(|error| {
                    CompileError::rule(t::SDF_FILTER, CompileErrorKind::Sdf { pdr_id, error })
                })?;
                d.orient(direction, &mut filters);
            }
            let dangling =
                |ie| CompileError::rule(ie, CompileErrorKind::DanglingReference { pdr_id, ie });
            let far = fars
                .iter()
                .position(|f| f.far_id == p.far_id)
                .ok_or_else(|| dangling(t::FAR_ID))? as u16;
            if p.qer_ids.len() > MAX_QERS_PER_PDR {
                return Err(CompileError::rule(
                    t::QER_ID,
                    CompileErrorKind::TooManyQers { pdr_id },
                ));
            }
            if p.urr_ids.len() > MAX_URRS_PER_PDR {
                return Err(CompileError::rule(
                    t::URR_ID,
                    CompileErrorKind::TooManyUrrs { pdr_id },
                ));
            }
            let mut pq = ArrayVec::new();
            for &qid in &p.qer_ids {
                let q = s.qers.get(&qid).ok_or_else(|| dangling(t::QER_ID))?;
                let idx = match qers
                    .iter()
                    .position(|c| c.rule.qer_id == qid && c.direction == direction)
                {
                    Some(i) => i,
                    None => {
                        let rule =
                            self.compile_qer(old.map(|o| (seid, o)), q, direction, &mut meters)?;
                        qers.push(CQer { direction, rule });
                        qers.len() - 1
                    }
                };
                pq.push(idx as u16);
            }
            let mut pu = [UrrRef::NONE; MAX_URRS_PER_PDR];
            for (slot, id) in pu.iter_mut().zip(&p.urr_ids) {
                let &(_, s) = urr_slots
                    .iter()
                    .find(|u| u.0 == *id)
                    .ok_or_else(|| dangling(t::URR_ID))?;
                *slot = UrrRef { slot: s };
            }
            pdrs.push(CPdr {
                keys: keys.into_iter().collect(),
                precedence: p.precedence,
                pdr_id,
                direction,
                qfi: pdi.qfi,
                remove_gtpu,
                filters: filters.into_boxed_slice(),
                far,
                qers: pq,
                urrs: pu,
            });
        }
        if let Some(o) = old {
            for m in o.meters() {
                if !qers.iter().any(|c| c.rule.meter.slot == m.meter.slot) {
                    meters.freed.push(m.meter.slot);
                }
            }
        }
        let keys: Vec<Key> = pdrs.iter().flat_map(|p| p.keys.iter().copied()).collect();
        let cmeters: Vec<CMeter> = qers
            .iter()
            .filter(|q| q.rule.meter.slot != NONE)
            .map(|q| CMeter {
                qer_id: q.rule.qer_id,
                direction: q.direction,
                meter: q.rule.meter,
            })
            .collect();
        Ok(Plan {
            cs: CSession::new(&keys, &urr_slots, &cmeters),
            pieces: Pieces { pdrs, fars, qers },
            meters,
            urrs,
        })
    }

    fn compile_qer(
        &self,
        old: Option<(u64, &CSession)>,
        q: &peregrine_n4::Qer,
        dir: Direction,
        delta: &mut SlotDelta,
    ) -> Result<QerRule, CompileError> {
        let (gate, mbr, gbr) = match dir {
            Direction::Uplink => (q.gate.ul, q.mbr.map(|m| m.ul), q.gbr.map(|g| g.ul)),
            Direction::Downlink => (q.gate.dl, q.mbr.map(|m| m.dl), q.gbr.map(|g| g.dl)),
        };
        let policy = self.cfg.qos.for_qfi(q.qfi);
        let meter_cfg: Option<TrTcmConfig> = policy.meter_kbps(mbr, gbr, ColourMode::Blind);
        let pacer = policy.pacer_kbps(mbr);
        let prev = old.and_then(|(seid, o)| {
            let m = o
                .meters()
                .find(|m| m.qer_id == q.id && m.direction == dir)?;
            Some((m.meter, self.compiled_qer(seid, o, m.meter.slot)))
        });
        let meter = match (meter_cfg, prev) {
            (None, _) => MeterRef {
                slot: NONE,
                generation: 0,
            },
            (Some(c), Some((m, Some(r)))) if r.meter_cfg == Some(c) && r.pacer == pacer => m,
            (Some(_), Some((m, _))) => {
                // Same slot, new config (or one filed nowhere): the workers re-create it.
                delta.bumped.push(m.slot);
                MeterRef {
                    slot: m.slot,
                    generation: next_gen(self.meters.gen(m.slot)),
                }
            }
            (Some(_), None) => {
                if delta.new as u64 >= self.meters.available() {
                    return Err(CompileError {
                        cause: cause::NO_RESOURCES_AVAILABLE,
                        offending_ie: Some(t::QER_ID),
                        kind: CompileErrorKind::MeterSlotsExhausted,
                    });
                }
                delta.new += 1;
                self.meters.peek(delta.new - 1)
            }
        };
        Ok(QerRule {
            qer_id: q.id,
            // Section 8.2.7: 0 = OPEN; 1 = CLOSED (spare values treated as closed).
            gate_open: gate == 0,
            meter_cfg,
            pacer,
            meter,
            qfi: q.qfi,
        })
    }
}
