use super::*;
use std::net::{Ipv4Addr, Ipv6Addr};

fn rt(ie: Ie) -> Vec<u8> {
    let mut v = Vec::new();
    ie.emit(&mut v).unwrap();
    let back = parse_list(&v, 0).unwrap();
    assert_eq!(back, vec![ie]);
    v
}

#[test]
fn leaf_round_trips() {
    let a4 = Ipv4Addr::new(10, 0, 0, 1);
    let a6 = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    assert_eq!(rt(Ie::Cause(1)), [0, 19, 0, 1, 1]);
    rt(Ie::SourceInterface(1));
    assert_eq!(
        rt(Ie::FTeid(FTeid::Assigned {
            teid: 0x11223344,
            ipv4: Some(a4),
            ipv6: None
        })),
        [0, 21, 0, 9, 1, 0x11, 0x22, 0x33, 0x44, 10, 0, 0, 1]
    );
    rt(Ie::FTeid(FTeid::Assigned {
        teid: 1,
        ipv4: Some(a4),
        ipv6: Some(a6),
    }));
    rt(Ie::FTeid(FTeid::Choose {
        v4: true,
        v6: false,
        choose_id: Some(5),
    }));
    rt(Ie::FTeid(FTeid::Choose {
        v4: true,
        v6: true,
        choose_id: None,
    }));
    rt(Ie::NetworkInstance(encode_labels("internet")));
    rt(Ie::SdfFilter(SdfFilter {
        flow_description: Some(b"permit out ip from any to assigned".to_vec()),
        tos_traffic_class: Some(0x1234),
        spi: Some(7),
        flow_label: Some(0xabcde),
        sdf_filter_id: Some(9),
    }));
    rt(Ie::GateStatus(GateStatus { ul: 1, dl: 0 }));
    rt(Ie::Mbr(BitRate {
        ul: (1 << 40) - 1,
        dl: 5,
    }));
    rt(Ie::Gbr(BitRate { ul: 1, dl: 2 }));
    rt(Ie::Precedence(255));
    rt(Ie::VolumeThreshold(Volume {
        total: Some(1),
        dl: Some(3),
        ..Default::default()
    }));
    rt(Ie::VolumeQuota(Volume {
        ul: Some(2),
        ..Default::default()
    }));
    rt(Ie::VolumeMeasurement(Volume {
        total: Some(1),
        ul: Some(2),
        dl: Some(3),
        total_packets: Some(4),
        ul_packets: Some(5),
        dl_packets: Some(6),
    }));
    rt(Ie::TimeThreshold(60));
    rt(Ie::TimeQuota(3600));
    rt(Ie::QueryUrrReference(0xdead_beef));
    rt(Ie::NodeReportType(Bitmap(node_report_type::UPFR)));
    assert_eq!(
        rt(Ie::RemoteGtpuPeer(RemoteGtpuPeer {
            ipv4: Some(a4),
            ..Default::default()
        })),
        [0, 103, 0, 5, 2, 10, 0, 0, 1]
    );
    rt(Ie::RemoteGtpuPeer(RemoteGtpuPeer {
        ipv4: Some(a4),
        ipv6: Some(a6),
        destination_interface: Some(0),
        network_instance: Some(encode_labels("access")),
    }));
    rt(Ie::ReportingTriggers(Bitmap(0x0102)));
    rt(Ie::ReportType(Bitmap(report_type::USAR)));
    rt(Ie::OffendingIe(60));
    rt(Ie::DestinationInterface(2));
    rt(Ie::UpFunctionFeatures(Bitmap(0x0000_0100_0001)));
    assert_eq!(
        rt(Ie::ApplyAction(Bitmap(apply_action::FORW))),
        [0, 44, 0, 2, 2, 0]
    );
    rt(Ie::PdrId(1));
    rt(Ie::FSeid(FSeid {
        seid: 0x0102030405060708,
        ipv4: Some(a4),
        ipv6: Some(a6),
    }));
    rt(Ie::NodeId(NodeId::Ipv4(a4)));
    rt(Ie::NodeId(NodeId::Ipv6(a6)));
    rt(Ie::NodeId(NodeId::fqdn("upf.example.org")));
    rt(Ie::MeasurementMethod(Bitmap(measurement_method::VOLUM)));
    rt(Ie::UsageReportTrigger(Bitmap(0x80)));
    rt(Ie::MeasurementPeriod(10));
    rt(Ie::DurationMeasurement(11));
    rt(Ie::TimeOfFirstPacket(12));
    rt(Ie::TimeOfLastPacket(13));
    rt(Ie::OuterHeaderCreation(OuterHeaderCreation {
        description: ohc::GTPU_UDP_IPV4,
        teid: Some(0x99),
        ipv4: Some(a4),
        ..Default::default()
    }));
    rt(Ie::OuterHeaderCreation(OuterHeaderCreation {
        description: ohc::UDP_IPV6 | ohc::C_TAG | ohc::S_TAG | ohc::N6,
        ipv6: Some(a6),
        port: Some(2152),
        c_tag: Some(0x10203),
        s_tag: Some(0x40506),
        ..Default::default()
    }));
    rt(Ie::UeIpAddress(UeIpAddress {
        sd: true,
        ipv4: Some(a4),
        ipv6: Some(a6),
        ipv6_prefix_delegation_bits: Some(3),
        ipv6_prefix_length: Some(64),
        ..Default::default()
    }));
    rt(Ie::UeIpAddress(UeIpAddress {
        chv4: true,
        chv6: true,
        ..Default::default()
    }));
    rt(Ie::OuterHeaderRemoval(OuterHeaderRemoval {
        description: 0,
        ext_header_deletion: None,
    }));
    rt(Ie::OuterHeaderRemoval(OuterHeaderRemoval {
        description: 6,
        ext_header_deletion: Some(1),
    }));
    rt(Ie::RecoveryTimeStamp(0xe000_0000));
    rt(Ie::UrSeqn(3));
    rt(Ie::FarId(0x8000_0001));
    rt(Ie::QerId(4));
    rt(Ie::UrrId(5));
    rt(Ie::BarId(6));
    assert_eq!(
        rt(Ie::StartTime(0xe6f0_0001)),
        [0, 75, 0, 4, 0xe6, 0xf0, 0, 1]
    );
    rt(Ie::EndTime(0xe6f0_0002));
    assert_eq!(
        rt(Ie::SuggestedBufferingPacketsCount(10)),
        [0, 140, 0, 1, 10]
    );
    assert_eq!(
        rt(Ie::FailedRuleId(FailedRuleId::Pdr(0x102))),
        [0, 114, 0, 3, 0, 1, 2]
    );
    rt(Ie::FailedRuleId(FailedRuleId::Far(7)));
    rt(Ie::FailedRuleId(FailedRuleId::Qer(8)));
    assert_eq!(
        rt(Ie::FailedRuleId(FailedRuleId::Urr(9))),
        [0, 114, 0, 5, 3, 0, 0, 0, 9]
    );
    rt(Ie::FailedRuleId(FailedRuleId::Bar(1)));
    // Rule ID type 5..31 is not defined; a value too short for its type is incorrect.
    for bad in [&[0u8, 114, 0, 2, 5, 0][..], &[0, 114, 0, 2, 1, 0]] {
        assert_eq!(
            parse_list(bad, 0).unwrap_err(),
            DecodeError::IeIncorrect { ie_type: 114 }
        );
    }
    rt(Ie::Qfi(9));
    rt(Ie::Raw(RawIe {
        ie_type: 1000,
        enterprise_id: None,
        value: vec![1, 2, 3],
    }));
    assert_eq!(
        rt(Ie::Raw(RawIe {
            ie_type: 0x8001,
            enterprise_id: Some(18681),
            value: vec![7]
        })),
        [0x80, 1, 0, 3, 0x48, 0xf9, 7]
    );
}

#[test]
fn grouped_round_trip_and_mandatory_members() {
    let pdi = Grouped::new(ie_type::PDI, vec![Ie::SourceInterface(0)]);
    let pdr = Ie::Grouped(Grouped::new(
        ie_type::CREATE_PDR,
        vec![
            Ie::PdrId(1),
            Ie::Precedence(10),
            Ie::Grouped(pdi),
            Ie::FarId(1),
        ],
    ));
    let v = rt(pdr);
    // Drop the Precedence: Mandatory IE missing, offending IE = Precedence.
    let mut broken = Vec::new();
    Ie::Grouped(Grouped::new(
        ie_type::CREATE_PDR,
        vec![
            Ie::PdrId(1),
            Ie::Grouped(Grouped::new(ie_type::PDI, vec![Ie::SourceInterface(0)])),
        ],
    ))
    .emit(&mut broken)
    .unwrap();
    assert_eq!(
        parse_list(&broken, 0).unwrap_err(),
        DecodeError::MandatoryIeMissing {
            ie_type: ie_type::PRECEDENCE
        }
    );
    assert!(v.len() > 20);
}

#[test]
fn iterator_errors() {
    // Header cut short.
    let mut it = IeIter::new(&[0, 19, 0]);
    assert_eq!(it.next(), Some(Err(DecodeError::IeLength { ie_type: 19 })));
    assert_eq!(it.next(), None);
    // Value past the end.
    let mut it = IeIter::new(&[0, 19, 0, 2, 1]);
    assert_eq!(it.next(), Some(Err(DecodeError::IeLength { ie_type: 19 })));
    assert_eq!(it.next(), None);
    // Vendor IE too short for its Enterprise ID.
    let mut it = IeIter::new(&[0x80, 1, 0, 1, 1]);
    assert_eq!(
        it.next(),
        Some(Err(DecodeError::IeIncorrect { ie_type: 0x8001 }))
    );
    // Known IE with a short value.
    assert_eq!(
        parse_list(&[0, 96, 0, 3, 1, 2, 3], 0).unwrap_err(),
        DecodeError::IeIncorrect { ie_type: 96 }
    );
    // Extra octets at the end of a fixed IE are ignored (section 8.1.1).
    assert_eq!(
        parse_list(&[0, 19, 0, 2, 1, 9], 0).unwrap(),
        vec![Ie::Cause(1)]
    );
}

#[test]
fn nesting_is_bounded() {
    // Update Forwarding Parameters has no mandatory members: nest it deeply.
    let mut v: Vec<u8> = Vec::new();
    for _ in 0..100 {
        let mut w = vec![0, ie_type::UPDATE_FORWARDING_PARAMETERS as u8];
        w.extend_from_slice(&(v.len() as u16).to_be_bytes());
        w.extend_from_slice(&v);
        v = w;
    }
    assert_eq!(
        parse_list(&v, 0).unwrap_err(),
        DecodeError::NestingTooDeep {
            ie_type: ie_type::UPDATE_FORWARDING_PARAMETERS
        }
    );
    // Exactly MAX_DEPTH levels are fine.
    let mut v: Vec<u8> = Vec::new();
    for _ in 0..MAX_DEPTH {
        let mut w = vec![0, ie_type::UPDATE_FORWARDING_PARAMETERS as u8];
        w.extend_from_slice(&(v.len() as u16).to_be_bytes());
        w.extend_from_slice(&v);
        v = w;
    }
    assert!(parse_list(&v, 0).is_ok());
}

#[test]
fn labels() {
    assert_eq!(encode_labels("a.bc"), [1, b'a', 2, b'b', b'c']);
    assert_eq!(decode_labels(&[1, b'a', 2, b'b', b'c']), "a.bc");
    assert_eq!(decode_labels(&[5, b'a']), "a");
}
