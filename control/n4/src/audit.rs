//! What we do with every IE of a Session Establishment / Modification Request that we do not
//! turn into state: never accept-and-ignore something that changes forwarding or charging.
//!
//! Three outcomes, by IE type (TS 29.244 V18.0.0 table 8.1.2-1 numbers 1-[`LAST_KNOWN`]) and
//! by the grouped IE it appears in:
//! * **honoured**: we implement it (the parsers in `session/build.rs` read it);
//! * **informational**: it describes the session but asks nothing of a UPF like ours (PDN
//!   Type, DNN, S-NSSAI, ...), or what it asks already holds here (PFCPSMReq-Flags DROBU: we
//!   keep no buffered packets; Measurement Information MNOP / ISTM: we always count packets
//!   and meter time from the URR's creation); accepted and listed in `docs/upf.md`;
//! * **refused**: any other IE of a type the specification defines, placed in a request we
//!   would otherwise accept. Inside a rule it is cause 73 "Rule creation/modification
//!   failure" with that IE as Offending IE and the rule in a Failed Rule ID; at the top of the
//!   message it is cause 76 "Service not supported". Bits of a honoured bitmap that we do not
//!   implement (a Reporting Trigger, a PFCPSMReq flag) refuse the IE the same way.
//!
//! IEs of a type beyond [`LAST_KNOWN`] and vendor-specific IEs are silently discarded as
//! section 7.6.1 requires for forward compatibility, and counted by type
//! ([`crate::N4Stats::ies_discarded`]).

use std::collections::BTreeMap;

use peregrine_pfcp::cause;
use peregrine_pfcp::ie::{
    ie_type as t, reporting_triggers as rt, smreq_flags, FailedRuleId, Grouped, Ie, ENTERPRISE_BIT,
};

use crate::session::Reject;
use crate::stats::bump;

/// The highest IE type of TS 29.244 V18.0.0 table 8.1.2-1 (Remove MBS Unicast Parameters).
pub const LAST_KNOWN: u16 = 304;

/// Reporting Triggers we implement (section 8.2.19): PERIO, VOLTH, TIMTH, VOLQU, TIMQU.
pub const REPORTING_TRIGGERS: u64 = rt::PERIO | rt::VOLTH | rt::TIMTH | rt::VOLQU | rt::TIMQU;
/// PFCPSMReq-Flags we honour (section 8.2.58): DROBU (nothing is buffered), SNDEM, QAURR.
pub const SMREQ_FLAGS: u64 = smreq_flags::DROBU | smreq_flags::SNDEM | smreq_flags::QAURR;
/// Measurement Information bits that already hold (section 8.2.68): ISTM 0x08, MNOP 0x10.
pub const MEASUREMENT_INFORMATION: u8 = 0x08 | 0x10;

/// Section 8.2.68 Measurement Information (not decoded by the PFCP crate).
const MEASUREMENT_INFORMATION_IE: u16 = 100;
/// Section 8.2.88 RQI.
const RQI_IE: u16 = 123;
/// Section 8.2.118 3GPP Interface Type (Source / Destination Interface Type).
const INTERFACE_TYPE_IE: u16 = 160;

/// Where an IE sits, for the tables below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Establishment,
    Modification,
    CreatePdr,
    UpdatePdr,
    Pdi,
    CreateFar,
    UpdateFar,
    Forwarding,
    UpdateForwarding,
    Urr,
    Qer,
    Bar,
    /// Remove PDR / FAR / URR / QER / BAR, Query URR: the rule ID only.
    IdOnly,
}

fn ctx_of_group(ie_type: u16) -> Option<Ctx> {
    Some(match ie_type {
        t::CREATE_PDR => Ctx::CreatePdr,
        t::UPDATE_PDR => Ctx::UpdatePdr,
        t::PDI => Ctx::Pdi,
        t::CREATE_FAR => Ctx::CreateFar,
        t::UPDATE_FAR => Ctx::UpdateFar,
        t::FORWARDING_PARAMETERS => Ctx::Forwarding,
        t::UPDATE_FORWARDING_PARAMETERS => Ctx::UpdateForwarding,
        t::CREATE_URR | t::UPDATE_URR => Ctx::Urr,
        t::CREATE_QER | t::UPDATE_QER => Ctx::Qer,
        t::CREATE_BAR | t::UPDATE_BAR => Ctx::Bar,
        t::REMOVE_PDR
        | t::REMOVE_FAR
        | t::REMOVE_URR
        | t::REMOVE_QER
        | t::REMOVE_BAR
        | t::QUERY_URR => Ctx::IdOnly,
        _ => return None,
    })
}

/// Honoured or informational types of each place (the rest of 1..=LAST_KNOWN is refused).
fn accepted(ctx: Ctx, ty: u16) -> bool {
    let list: &[u16] = match ctx {
        // Node ID, CP F-SEID, the rules; informational: FQ-CSID (65), Recovery Time Stamp,
        // PDN Type (113), User ID (141), APN/DNN (159), CP PFCP Entity IP Address (185),
        // S-NSSAI (257), RAT Type (275), Group ID (291).
        Ctx::Establishment => &[
            t::NODE_ID,
            t::F_SEID,
            t::CREATE_PDR,
            t::CREATE_FAR,
            t::CREATE_URR,
            t::CREATE_QER,
            t::CREATE_BAR,
            65,
            t::RECOVERY_TIME_STAMP,
            113,
            141,
            159,
            185,
            257,
            275,
            291,
        ],
        Ctx::Modification => &[
            t::F_SEID,
            t::REMOVE_PDR,
            t::REMOVE_FAR,
            t::REMOVE_URR,
            t::REMOVE_QER,
            t::REMOVE_BAR,
            t::CREATE_PDR,
            t::CREATE_FAR,
            t::CREATE_URR,
            t::CREATE_QER,
            t::CREATE_BAR,
            t::UPDATE_PDR,
            t::UPDATE_FAR,
            t::UPDATE_URR,
            t::UPDATE_QER,
            t::UPDATE_BAR,
            t::QUERY_URR,
            t::PFCPSMREQ_FLAGS,
            t::QUERY_URR_REFERENCE,
            65,
            275,
        ],
        Ctx::CreatePdr | Ctx::UpdatePdr => &[
            t::PDR_ID,
            t::PRECEDENCE,
            t::PDI,
            t::OUTER_HEADER_REMOVAL,
            t::FAR_ID,
            t::URR_ID,
            t::QER_ID,
        ],
        Ctx::Pdi => &[
            t::SOURCE_INTERFACE,
            t::F_TEID,
            t::NETWORK_INSTANCE,
            t::UE_IP_ADDRESS,
            t::SDF_FILTER,
            t::QFI,
            INTERFACE_TYPE_IE,
        ],
        Ctx::CreateFar | Ctx::UpdateFar => &[
            t::FAR_ID,
            t::APPLY_ACTION,
            t::FORWARDING_PARAMETERS,
            t::UPDATE_FORWARDING_PARAMETERS,
            t::BAR_ID,
        ],
        Ctx::Forwarding | Ctx::UpdateForwarding => &[
            t::DESTINATION_INTERFACE,
            t::NETWORK_INSTANCE,
            t::OUTER_HEADER_CREATION,
            INTERFACE_TYPE_IE,
            t::PFCPSMREQ_FLAGS,
        ],
        Ctx::Urr => &[
            t::URR_ID,
            t::MEASUREMENT_METHOD,
            t::REPORTING_TRIGGERS,
            t::MEASUREMENT_PERIOD,
            t::VOLUME_THRESHOLD,
            t::TIME_THRESHOLD,
            t::VOLUME_QUOTA,
            t::TIME_QUOTA,
            MEASUREMENT_INFORMATION_IE,
        ],
        Ctx::Qer => &[t::QER_ID, t::GATE_STATUS, t::MBR, t::GBR, t::QFI, RQI_IE],
        Ctx::Bar => &[t::BAR_ID, t::SUGGESTED_BUFFERING_PACKETS_COUNT],
        Ctx::IdOnly => &[t::PDR_ID, t::FAR_ID, t::URR_ID, t::QER_ID, t::BAR_ID],
    };
    list.contains(&ty)
}

/// Whether the value of an accepted IE asks only for what we do.
fn value_ok(ctx: Ctx, ie: &Ie) -> bool {
    match ie {
        Ie::ReportingTriggers(b) => b.0 & !REPORTING_TRIGGERS == 0,
        // SNDEM belongs in Update Forwarding Parameters, QAURR at the top; DROBU asks for
        // nothing here wherever it is.
        Ie::PfcpsmReqFlags(b) => {
            let allowed = match ctx {
                Ctx::UpdateForwarding => smreq_flags::SNDEM | smreq_flags::DROBU,
                Ctx::Modification => smreq_flags::DROBU | smreq_flags::QAURR,
                _ => 0,
            };
            b.0 & !(allowed & SMREQ_FLAGS) == 0
        }
        Ie::Raw(r) if r.enterprise_id.is_none() => match r.ie_type {
            MEASUREMENT_INFORMATION_IE => r.value.iter().enumerate().all(|(i, &b)| {
                if i == 0 {
                    b & !MEASUREMENT_INFORMATION == 0
                } else {
                    b == 0
                }
            }),
            // RQI = 1 would ask us to set RQI in the PDU Session Container (not done).
            RQI_IE => r.value.first().is_none_or(|b| b & 1 == 0),
            _ => true,
        },
        _ => true,
    }
}

/// The Failed Rule ID of a rule group, if it names one.
fn rule_id(g: &Grouped) -> Option<FailedRuleId> {
    let id = g.ies.iter().find_map(|i| match i {
        Ie::PdrId(x) => Some(FailedRuleId::Pdr(*x)),
        Ie::FarId(x) => Some(FailedRuleId::Far(*x)),
        Ie::UrrId(x) => Some(FailedRuleId::Urr(*x)),
        Ie::QerId(x) => Some(FailedRuleId::Qer(*x)),
        Ie::BarId(x) => Some(FailedRuleId::Bar(*x)),
        _ => None,
    })?;
    Some(id)
}

fn known(ty: u16) -> bool {
    ty & ENTERPRISE_BIT == 0 && (1..=LAST_KNOWN).contains(&ty)
}

/// Audit one IE found in `ctx`: recurse into rule groups, refuse what we would ignore.
fn ie(ctx: Ctx, x: &Ie, discarded: &mut BTreeMap<u16, u64>) -> Result<(), Reject> {
    // Vendor IEs keep the enterprise bit in their type.
    let ty = x.ie_type();
    if !known(ty) {
        bump(discarded, ty);
        return Ok(());
    }
    let top = matches!(ctx, Ctx::Establishment | Ctx::Modification);
    let refuse = || {
        if top {
            Reject::new(cause::SERVICE_NOT_SUPPORTED, Some(ty))
        } else {
            Reject::rule(ty)
        }
    };
    if !accepted(ctx, ty) || !value_ok(ctx, x) {
        return Err(refuse());
    }
    if let (Ie::Grouped(g), Some(inner)) = (x, ctx_of_group(ty)) {
        group(inner, g, discarded)?;
    }
    Ok(())
}

fn group(ctx: Ctx, g: &Grouped, discarded: &mut BTreeMap<u16, u64>) -> Result<(), Reject> {
    let at = |r: Reject| match rule_id(g) {
        Some(id) => r.at(id),
        None => r,
    };
    for x in &g.ies {
        ie(ctx, x, discarded).map_err(at)?;
    }
    Ok(())
}

/// Audit a Session Establishment Request's IEs, top level and every rule.
pub(crate) fn establishment(ies: &[Ie], discarded: &mut BTreeMap<u16, u64>) -> Result<(), Reject> {
    ies.iter()
        .try_for_each(|x| ie(Ctx::Establishment, x, discarded))
}

/// Audit a Session Modification Request's IEs, top level and every rule.
pub(crate) fn modification(ies: &[Ie], discarded: &mut BTreeMap<u16, u64>) -> Result<(), Reject> {
    ies.iter()
        .try_for_each(|x| ie(Ctx::Modification, x, discarded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use peregrine_pfcp::ie::{Bitmap, RawIe};

    fn raw(ty: u16, value: &[u8]) -> Ie {
        Ie::Raw(RawIe {
            ie_type: ty,
            enterprise_id: None,
            value: value.to_vec(),
        })
    }

    fn urr(extra: Ie) -> Ie {
        Ie::Grouped(Grouped::new(
            t::CREATE_URR,
            vec![
                Ie::UrrId(4),
                Ie::MeasurementMethod(Bitmap(2)),
                Ie::ReportingTriggers(Bitmap(rt::VOLTH)),
                extra,
            ],
        ))
    }

    #[test]
    fn refused_inside_rules_name_ie_and_rule() {
        let mut d = BTreeMap::new();
        // Monitoring Time (33) in a Create URR: 73, IE 33, URR 4.
        let e = establishment(&[urr(raw(33, &[0, 0, 0, 1]))], &mut d).unwrap_err();
        assert_eq!(e.cause, cause::RULE_CREATION_MODIFICATION_FAILURE);
        assert_eq!(e.offending_ie, Some(33));
        assert_eq!(e.failed_rule, Some(FailedRuleId::Urr(4)));
        // A trigger bit we do not implement (START) refuses the Reporting Triggers IE.
        let bad = Ie::ReportingTriggers(Bitmap(rt::VOLTH | 0x10));
        let g = Grouped::new(t::UPDATE_URR, vec![Ie::UrrId(4), bad]);
        let e = modification(&[Ie::Grouped(g)], &mut d).unwrap_err();
        assert_eq!(e.offending_ie, Some(t::REPORTING_TRIGGERS));
        // Duplicating Parameters (5) in a Create FAR; Redirect Information (38) nested in
        // its Forwarding Parameters.
        for (inner, off) in [
            (raw(5, &[]), 5),
            (
                Ie::Grouped(Grouped::new(
                    t::FORWARDING_PARAMETERS,
                    vec![Ie::DestinationInterface(1), raw(38, &[0, 0, 0])],
                )),
                38,
            ),
        ] {
            let far = Grouped::new(t::CREATE_FAR, vec![Ie::FarId(9), inner]);
            let e = establishment(&[Ie::Grouped(far)], &mut d).unwrap_err();
            assert_eq!(
                (e.offending_ie, e.failed_rule),
                (Some(off), Some(FailedRuleId::Far(9)))
            );
        }
        assert!(d.is_empty());
    }

    #[test]
    fn top_level_unsupported_is_76_and_informational_passes() {
        let mut d = BTreeMap::new();
        // Create Traffic Endpoint (127), User Plane Inactivity Timer (117): 76.
        for ty in [127, 117, 152] {
            let e = establishment(&[raw(ty, &[1])], &mut d).unwrap_err();
            assert_eq!(
                (e.cause, e.offending_ie),
                (cause::SERVICE_NOT_SUPPORTED, Some(ty))
            );
        }
        // PDN Type, User ID, DNN, S-NSSAI: accepted.
        for ty in [113, 141, 159, 257] {
            establishment(&[raw(ty, &[1])], &mut d).unwrap();
        }
        // QAURR + DROBU fine at the top; SUMPC is not; SNDEM only in Update FP.
        modification(
            &[Ie::PfcpsmReqFlags(Bitmap(
                smreq_flags::QAURR | smreq_flags::DROBU,
            ))],
            &mut d,
        )
        .unwrap();
        assert!(modification(&[Ie::PfcpsmReqFlags(Bitmap(0x08))], &mut d).is_err());
        assert!(modification(&[Ie::PfcpsmReqFlags(Bitmap(smreq_flags::SNDEM))], &mut d).is_err());
    }

    #[test]
    fn values_that_already_hold_pass() {
        let mut d = BTreeMap::new();
        establishment(&[urr(raw(100, &[0x18]))], &mut d).unwrap();
        // INAM (inactive measurement) is not done.
        assert!(establishment(&[urr(raw(100, &[0x02]))], &mut d).is_err());
        let qer = |v: u8| {
            Ie::Grouped(Grouped::new(
                t::CREATE_QER,
                vec![Ie::QerId(1), raw(123, &[v])],
            ))
        };
        establishment(&[qer(0)], &mut d).unwrap();
        assert!(establishment(&[qer(1)], &mut d).is_err());
    }

    #[test]
    fn unknown_and_vendor_ies_are_discarded_and_counted() {
        let mut d = BTreeMap::new();
        let vendor = Ie::Raw(RawIe {
            ie_type: 40000,
            enterprise_id: Some(18681),
            value: vec![1, 2],
        });
        establishment(&[raw(LAST_KNOWN + 1, &[]), urr(vendor)], &mut d).unwrap();
        assert_eq!(d.get(&(LAST_KNOWN + 1)), Some(&1));
        assert_eq!(d.get(&(40000 | ENTERPRISE_BIT)), Some(&1));
    }
}
