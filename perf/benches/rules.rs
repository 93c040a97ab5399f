//! Control-plane cost of the PFCP rule compiler (peregrine-rules): `upsert` + `build` per
//! session at 1 000 and 100 000 sessions, and one `build` after one change with 100 000
//! sessions present (the publish latency a PFCP modification adds), also with the compiler
//! sized for 4M URRs (2^15 shards, a 1M-session UPF's table). Also prints the
//! memory per session, measured with a counting allocator (n4 sessions and compiler
//! separately) beside the compiler's own estimate.
//!
//! Run with `cargo bench -p peregrine-perf --bench rules`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use peregrine_n4::Session;
use peregrine_rules::static_sessions::{synthetic, to_sessions, N3Addresses, SyntheticParams};
use peregrine_rules::{session_bytes_estimate, Compiler, CompilerConfig};
use peregrine_testkit::alloc::CountingAlloc;
use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// Live heap bytes, for the memory figures.
#[global_allocator]
static A: CountingAlloc = CountingAlloc::new();

const N3: N3Addresses = N3Addresses {
    v4: Some(Ipv4Addr::new(192, 0, 2, 1)),
    v6: Some(Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 1)),
};

fn sessions(n: usize) -> Vec<Session> {
    let p = SyntheticParams {
        mbr_kbps: Some(50_000),
        ue_pool_v6: Ipv6Addr::new(0xfd45, 0, 0, 0, 0, 0, 0, 0),
        ..SyntheticParams::default()
    };
    to_sessions(&synthetic(n, &p), N3).unwrap()
}

fn compiler_config(n: usize) -> CompilerConfig {
    CompilerConfig {
        local_v4: N3.v4.into_iter().collect(),
        local_v6: N3.v6.into_iter().collect(),
        max_meter_slots: 2 * n as u32,
        max_urr_slots: n as u32,
        qos: peregrine_dataplane::qos::QosPolicies::new(
            peregrine_dataplane::qos::QerPolicy::legacy_policing(),
        ),
    }
}

fn compiler(n: usize) -> Compiler {
    Compiler::new(compiler_config(n))
}

fn live() -> isize {
    A.live() as isize
}

fn report_memory(n: usize) {
    let a = live();
    let s = sessions(n);
    let b = live();
    let mut c = compiler(n);
    for x in &s {
        c.upsert(x).unwrap();
    }
    let t = c.build();
    let d = live();
    let st = c.stats();
    let est_n4 = s.iter().map(session_bytes_estimate).sum::<usize>() / n;
    println!(
        "rules memory, {n} sessions, bytes/session: n4 Session measured {} (estimate {est_n4}); \
         compiler measured {} (estimate {}: compiled {}, shards {}, indexes {})",
        (b - a) / n as isize,
        (d - b) / n as isize,
        st.total_bytes() / n,
        st.compiled_bytes / n,
        st.shard_bytes / n,
        st.index_bytes / n,
    );
    drop((t, c, s));
}

fn bench_rules(c: &mut Criterion) {
    report_memory(100_000);
    let mut g = c.benchmark_group("rules");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    g.warm_up_time(Duration::from_secs(1));
    for n in [1_000usize, 100_000] {
        let s = sessions(n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("upsert_build_{n}"), |b| {
            b.iter_batched(
                || compiler(n),
                |mut c| {
                    for x in &s {
                        c.upsert(x).unwrap();
                    }
                    black_box(c.build());
                    c
                },
                BatchSize::PerIteration,
            )
        });
    }
    // One modification (DL MBR toggles, so the meter generation bumps) and a rebuild.
    let n = 100_000;
    let s = sessions(n);
    let mut c = compiler(n);
    for x in &s {
        c.upsert(x).unwrap();
    }
    black_box(c.build());
    let mut changed = s[54_321].clone();
    let mut flip = false;
    g.throughput(Throughput::Elements(1));
    g.bench_function("upsert_one_then_build_100000", |b| {
        b.iter(|| {
            flip = !flip;
            changed.qers.get_mut(&1).unwrap().mbr.as_mut().unwrap().dl =
                if flip { 70_000 } else { 50_000 };
            c.upsert(&changed).unwrap();
            black_box(c.build())
        })
    });
    // The same with the compiler sized for 4M URRs (2^15 shards, as a 1M-session UPF has):
    // what a publish costs beyond the patched shards grows with the shard count if the
    // snapshot copies a pointer per shard (before the two-level shard table).
    let mut c = Compiler::new(CompilerConfig {
        max_meter_slots: 8 << 20,
        max_urr_slots: 4 << 20,
        ..compiler_config(n)
    });
    for x in &s {
        c.upsert(x).unwrap();
    }
    let mut prev = c.build();
    g.bench_function("upsert_one_then_build_100000_2p15_shards", |b| {
        b.iter(|| {
            flip = !flip;
            changed.qers.get_mut(&1).unwrap().mbr.as_mut().unwrap().dl =
                if flip { 70_000 } else { 50_000 };
            c.upsert(&changed).unwrap();
            // Keep the previous snapshot alive until the next one exists, then drop it, as
            // the publisher retires it: the drop is part of a publish's cost.
            prev = black_box(c.build());
        })
    });
    // What the flat pointer array cost per publish before the two-level table, measured
    // on the same shards: clone a `Vec<Arc<Shard>>` of all 2^15 and drop the previous one.
    let flat: Vec<std::sync::Arc<peregrine_dataplane::upf::Shard>> =
        prev.shards.iter().cloned().collect();
    let mut prev_flat = flat.clone();
    g.bench_function("flat_shard_array_clone_and_drop_2p15", |b| {
        b.iter(|| {
            prev_flat = black_box(flat.clone());
        })
    });
    black_box((&prev, &prev_flat));
    g.finish();
}

criterion_group!(benches, bench_rules);
criterion_main!(benches);
