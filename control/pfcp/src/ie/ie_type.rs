//! IE type values (TS 29.244 section 8.1.2, table 8.1.2-1).

pub const CREATE_PDR: u16 = 1;
pub const PDI: u16 = 2;
pub const CREATE_FAR: u16 = 3;
pub const FORWARDING_PARAMETERS: u16 = 4;
pub const CREATE_URR: u16 = 6;
pub const CREATE_QER: u16 = 7;
pub const CREATED_PDR: u16 = 8;
pub const UPDATE_PDR: u16 = 9;
pub const UPDATE_FAR: u16 = 10;
pub const UPDATE_FORWARDING_PARAMETERS: u16 = 11;
/// Update BAR in Session Report Response (table 7.5.9.2-1).
pub const UPDATE_BAR_SRR: u16 = 12;
pub const UPDATE_URR: u16 = 13;
pub const UPDATE_QER: u16 = 14;
pub const REMOVE_PDR: u16 = 15;
pub const REMOVE_FAR: u16 = 16;
pub const REMOVE_URR: u16 = 17;
pub const REMOVE_QER: u16 = 18;
pub const CAUSE: u16 = 19;
pub const SOURCE_INTERFACE: u16 = 20;
pub const F_TEID: u16 = 21;
pub const NETWORK_INSTANCE: u16 = 22;
pub const SDF_FILTER: u16 = 23;
pub const GATE_STATUS: u16 = 25;
pub const MBR: u16 = 26;
pub const GBR: u16 = 27;
pub const PRECEDENCE: u16 = 29;
pub const VOLUME_THRESHOLD: u16 = 31;
pub const TIME_THRESHOLD: u16 = 32;
pub const REPORTING_TRIGGERS: u16 = 37;
pub const REPORT_TYPE: u16 = 39;
pub const OFFENDING_IE: u16 = 40;
pub const DESTINATION_INTERFACE: u16 = 42;
pub const UP_FUNCTION_FEATURES: u16 = 43;
pub const APPLY_ACTION: u16 = 44;
/// PFCPSMReq-Flags (section 8.2.58).
pub const PFCPSMREQ_FLAGS: u16 = 49;
pub const PDR_ID: u16 = 56;
pub const F_SEID: u16 = 57;
pub const NODE_ID: u16 = 60;
pub const MEASUREMENT_METHOD: u16 = 62;
pub const USAGE_REPORT_TRIGGER: u16 = 63;
pub const MEASUREMENT_PERIOD: u16 = 64;
pub const VOLUME_MEASUREMENT: u16 = 66;
pub const DURATION_MEASUREMENT: u16 = 67;
pub const TIME_OF_FIRST_PACKET: u16 = 69;
pub const TIME_OF_LAST_PACKET: u16 = 70;
pub const VOLUME_QUOTA: u16 = 73;
/// Time Quota (section 8.2.51), seconds.
pub const TIME_QUOTA: u16 = 74;
pub const START_TIME: u16 = 75;
pub const END_TIME: u16 = 76;
/// Query URR in Session Modification Request (table 7.5.4.10-1).
pub const QUERY_URR: u16 = 77;
/// Usage Report in Session Modification Response (table 7.5.5.2-1).
pub const USAGE_REPORT_SMR: u16 = 78;
/// Usage Report in Session Deletion Response (table 7.5.7.2-1).
pub const USAGE_REPORT_SDR: u16 = 79;
/// Usage Report in Session Report Request (table 7.5.8.3-1).
pub const USAGE_REPORT_SRR: u16 = 80;
pub const URR_ID: u16 = 81;
pub const DOWNLINK_DATA_REPORT: u16 = 83;
pub const OUTER_HEADER_CREATION: u16 = 84;
pub const CREATE_BAR: u16 = 85;
/// Update BAR in Session Modification Request (table 7.5.4.14-1).
pub const UPDATE_BAR: u16 = 86;
pub const REMOVE_BAR: u16 = 87;
pub const BAR_ID: u16 = 88;
pub const UE_IP_ADDRESS: u16 = 93;
pub const OUTER_HEADER_REMOVAL: u16 = 95;
pub const RECOVERY_TIME_STAMP: u16 = 96;
/// Node Report Type (section 8.2.69), see [`super::node_report_type`].
pub const NODE_REPORT_TYPE: u16 = 101;
/// User Plane Path Failure Report (table 7.4.5.1.2-1).
pub const USER_PLANE_PATH_FAILURE_REPORT: u16 = 102;
/// Remote GTP-U Peer (section 8.2.70).
pub const REMOTE_GTPU_PEER: u16 = 103;
pub const UR_SEQN: u16 = 104;
pub const FAR_ID: u16 = 108;
pub const QER_ID: u16 = 109;
pub const FAILED_RULE_ID: u16 = 114;
pub const QFI: u16 = 124;
/// Query URR Reference (section 8.2.98).
pub const QUERY_URR_REFERENCE: u16 = 125;
pub const SUGGESTED_BUFFERING_PACKETS_COUNT: u16 = 140;
/// User Plane Path Recovery Report (table 7.4.5.1.3-1).
pub const USER_PLANE_PATH_RECOVERY_REPORT: u16 = 187;

/// Whether `t` is one of the grouped IEs decoded as [`super::Grouped`].
pub const fn is_grouped(t: u16) -> bool {
    matches!(
        t,
        CREATE_PDR
            | PDI
            | CREATE_FAR
            | FORWARDING_PARAMETERS
            | CREATE_URR
            | CREATE_QER
            | CREATED_PDR
            | UPDATE_PDR
            | UPDATE_FAR
            | UPDATE_FORWARDING_PARAMETERS
            | UPDATE_URR
            | UPDATE_QER
            | REMOVE_PDR
            | REMOVE_FAR
            | REMOVE_URR
            | REMOVE_QER
            | USAGE_REPORT_SMR
            | USAGE_REPORT_SDR
            | USAGE_REPORT_SRR
            | DOWNLINK_DATA_REPORT
            | CREATE_BAR
            | REMOVE_BAR
            | UPDATE_BAR
            | UPDATE_BAR_SRR
            | QUERY_URR
            | USER_PLANE_PATH_FAILURE_REPORT
            | USER_PLANE_PATH_RECOVERY_REPORT
    )
}

/// Mandatory members of a grouped IE (section 7.5 tables), checked on decode.
pub const fn mandatory_members(t: u16) -> &'static [u16] {
    match t {
        CREATE_PDR => &[PDR_ID, PRECEDENCE, PDI], // table 7.5.2.2-1
        PDI => &[SOURCE_INTERFACE],               // table 7.5.2.2-2
        CREATE_FAR => &[FAR_ID, APPLY_ACTION],    // table 7.5.2.3-1
        FORWARDING_PARAMETERS => &[DESTINATION_INTERFACE], // table 7.5.2.3-2
        CREATE_URR => &[URR_ID, MEASUREMENT_METHOD, REPORTING_TRIGGERS], // 7.5.2.4-1
        CREATE_QER => &[QER_ID, GATE_STATUS],     // table 7.5.2.5-1
        CREATED_PDR | UPDATE_PDR | REMOVE_PDR | DOWNLINK_DATA_REPORT => &[PDR_ID],
        UPDATE_FAR | REMOVE_FAR => &[FAR_ID],
        UPDATE_URR | REMOVE_URR | QUERY_URR => &[URR_ID],
        UPDATE_QER | REMOVE_QER => &[QER_ID],
        USAGE_REPORT_SMR | USAGE_REPORT_SDR | USAGE_REPORT_SRR => {
            &[URR_ID, UR_SEQN, USAGE_REPORT_TRIGGER]
        }
        CREATE_BAR | REMOVE_BAR | UPDATE_BAR | UPDATE_BAR_SRR => &[BAR_ID],
        _ => &[],
    }
}
