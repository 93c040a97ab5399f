//! The Kestrel figures (perf/results/kestrel.md) as SVG bar charts, from the measurements'
//! own outputs:
//! - `kestrel-bench.svg` / `.json`: ns per packet of every variant of the criterion bench
//!   `cargo bench -p peregrine-perf --bench kestrel` (criterion's median per iteration over
//!   its 4096 packets), read from `<criterion>/kestrel_update/*/new/estimates.json`;
//! - `kestrel-export.svg`: export bandwidth per mode as the daemon's summary line printed it
//!   (`peregrine run --config examples/kestrel.toml 2>&1 | tee log`), beside the seed's;
//! - `kestrel-upf.svg`: pg-upf `--kestrel-compare`'s paired round ratios per direction,
//!   against the 0.9 goal, from its JSON.
//!
//! `pg-kestrel-plots --criterion target/criterion --export-log log --upf
//! perf/results/kestrel-upf.json --out perf/results`

use clap::Parser;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
struct Args {
    /// Criterion's output directory.
    #[arg(long, default_value = "target/criterion")]
    criterion: PathBuf,
    /// A log of `peregrine run --config examples/kestrel.toml` (its `kestrel:` summary line).
    #[arg(long)]
    export_log: Option<PathBuf>,
    /// pg-upf `--kestrel-compare`'s JSON.
    #[arg(long)]
    upf: Option<PathBuf>,
    #[arg(long, default_value = "perf/results")]
    out: PathBuf,
}

/// Packets per criterion iteration (perf/benches/kestrel.rs `N`).
const PACKETS_PER_ITER: f64 = 4096.0;

/// The bench variants in plotting order, with their labels.
const VARIANTS: [(&str, &str); 8] = [
    ("plain_cms_3x512", "plain CMS"),
    (
        "plain_cms_3x512_burst_prefetch",
        "plain CMS, burst+prefetch",
    ),
    ("kestrel_3x512_before_128B", "Kestrel before (128 B)"),
    ("kestrel_3x512_reference", "Kestrel reference (wide)"),
    (
        "kestrel_3x512_before_compare_bins",
        "Kestrel before (64 B hot, compare bins)",
    ),
    ("kestrel_3x512", "Kestrel (64 B hot, bin tables)"),
    ("postcards_full", "postcards full"),
    ("postcards_delta", "postcards delta"),
];

struct Bar {
    label: String,
    value: f64,
    colour: RGBColor,
    /// Text above the bar (the value unless given).
    text: Option<String>,
}

fn fail(msg: &str) -> ! {
    eprintln!("pg-kestrel-plots: {msg}");
    std::process::exit(2)
}

fn read_json(p: &Path) -> Value {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| fail(&format!("{}: {e}", p.display())));
    serde_json::from_str(&t).unwrap_or_else(|e| fail(&format!("{}: {e}", p.display())))
}

/// Bars with their values on top, one colour each; `log` for a logarithmic y axis.
fn bars(
    path: &Path,
    title: &str,
    ylabel: &str,
    bars: &[Bar],
    hline: Option<(f64, &str)>,
    log: bool,
) {
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        let ymax = bars
            .iter()
            .map(|b| b.value)
            .fold(0.0, f64::max)
            .max(hline.map_or(0.0, |h| h.0))
            * 1.2;
        let root =
            SVGBackend::new(path, (150 * bars.len().max(4) as u32 + 120, 460)).into_drawing_area();
        root.fill(&WHITE)?;
        let n = bars.len() as f64;
        let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
        let fmt = |x: &f64| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 1e-6 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        let mut cb = ChartBuilder::on(&root);
        cb.caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(60)
            .y_label_area_size(64);
        let text = |b: &Bar| {
            b.text.clone().unwrap_or_else(|| {
                format!("{:.3}", b.value)
                    .trim_end_matches('0')
                    .trim_end_matches('.')
                    .to_string()
            })
        };
        if log {
            let ymin = bars
                .iter()
                .map(|b| b.value)
                .filter(|&v| v > 0.0)
                .fold(f64::MAX, f64::min)
                / 3.0;
            let mut c = cb.build_cartesian_2d(0.0..n, (ymin..ymax * 3.0).log_scale())?;
            mesh_and_bars(&mut c, bars, &fmt, ylabel, ymin, &text, |v| v * 1.25)?;
        } else {
            let mut c = cb.build_cartesian_2d(0.0..n, 0.0..ymax)?;
            mesh_and_bars(&mut c, bars, &fmt, ylabel, 0.0, &text, |v| v + ymax * 0.02)?;
            if let Some((y, name)) = hline {
                c.draw_series([PathElement::new(
                    vec![(0.0, y), (n, y)],
                    RED.stroke_width(2),
                )])?;
                c.draw_series([Text::new(
                    name.to_string(),
                    (0.05, y + ymax * 0.02),
                    ("sans-serif", 12).into_font().color(&RED),
                )])?;
            }
        }
        root.present()?;
        Ok(())
    };
    match draw() {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => fail(&format!("cannot draw {}: {e}", path.display())),
    }
}

/// [`bars`]' mesh (x labels by `fmt`) and its bars, from `floor` up, each with its `text`
/// at height `text_y(value)`: one drawing for the linear and the logarithmic y axis.
fn mesh_and_bars<'a, Y>(
    c: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    bars: &[Bar],
    fmt: &dyn Fn(&f64) -> String,
    ylabel: &str,
    floor: f64,
    text: &dyn Fn(&Bar) -> String,
    text_y: impl Fn(f64) -> f64,
) -> Result<(), Box<dyn std::error::Error>>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len() * 2 + 1)
        .x_label_formatter(fmt)
        .x_label_style(("sans-serif", 11))
        .y_desc(ylabel)
        .draw()?;
    for (i, b) in bars.iter().enumerate() {
        let x = i as f64;
        c.draw_series([Rectangle::new(
            [(x + 0.15, floor), (x + 0.85, b.value)],
            b.colour.filled(),
        )])?;
        c.draw_series([Text::new(
            text(b),
            (x + 0.2, text_y(b.value)),
            ("sans-serif", 12),
        )])?;
    }
    Ok(())
}

const GREY: RGBColor = RGBColor(150, 150, 150);
const ORANGE: RGBColor = RGBColor(230, 140, 0);
const NAVY: RGBColor = RGBColor(40, 70, 160);

fn bench(a: &Args) {
    let dir = a.criterion.join("kestrel_update");
    let mut rows = vec![];
    let mut out = serde_json::Map::new();
    for (id, label) in VARIANTS {
        let p = dir.join(id).join("new/estimates.json");
        if !p.exists() {
            eprintln!("no {}: skipped", p.display());
            continue;
        }
        let v = read_json(&p);
        let ns = v["median"]["point_estimate"]
            .as_f64()
            .unwrap_or_else(|| fail(&format!("{}: no median.point_estimate", p.display())))
            / PACKETS_PER_ITER;
        out.insert(id.to_string(), serde_json::json!(ns));
        let colour = match id {
            i if i.starts_with("plain") => GREY,
            "kestrel_3x512" => NAVY,
            i if i.starts_with("kestrel") => ORANGE,
            _ => GREEN,
        };
        rows.push(Bar {
            label: label.to_string(),
            value: ns,
            colour,
            text: None,
        });
    }
    if rows.is_empty() {
        fail(&format!("no criterion results under {}", dir.display()));
    }
    let cms = out.get("plain_cms_3x512").and_then(Value::as_f64);
    let hline = cms.map(|c| (2.0 * c, "goal: 2 x plain CMS"));
    bars(
        &a.out.join("kestrel-bench.svg"),
        "Kestrel update vs plain Count-Min (criterion median, ns per packet)",
        "ns per packet",
        &rows,
        hline,
        false,
    );
    let text = serde_json::to_string_pretty(&serde_json::json!({
        "what": "criterion median per packet, cargo bench -p peregrine-perf --bench kestrel",
        "ns_per_packet": out,
    }))
    .expect("json");
    let p = a.out.join("kestrel-bench.json");
    std::fs::write(&p, text).unwrap_or_else(|e| fail(&format!("{}: {e}", p.display())));
}

/// The `kestrel:` summary line's export figures: (sketches, pm, postcards) Mbit/s.
fn parse_export(log: &str) -> Option<(f64, f64, f64)> {
    let line = log
        .lines()
        .find(|l| l.contains("kestrel:") && l.contains("Mbit/s"))?;
    let after = line.split("export ").nth(1)?;
    let mut it = after.split(", ");
    let num = |s: Option<&str>, what: &str| -> Option<f64> {
        let s = s?.trim();
        s.contains(what).then_some(())?;
        s.split_whitespace().next()?.parse().ok()
    };
    Some((
        num(it.next(), "sketches")?,
        num(it.next(), "pm")?,
        num(it.next(), "postcards")?,
    ))
}

fn export(a: &Args, log: &Path) {
    let text =
        std::fs::read_to_string(log).unwrap_or_else(|e| fail(&format!("{}: {e}", log.display())));
    let (sk, pm, pc) = parse_export(&text).unwrap_or_else(|| {
        fail(&format!(
            "{}: no `kestrel: ... export ... Mbit/s` line",
            log.display()
        ))
    });
    let ours = |l: &str, v: f64| Bar {
        label: format!("{l} (ours)"),
        value: v,
        colour: NAVY,
        text: None,
    };
    let paper = |l: &str, v: f64, t: &str| Bar {
        label: format!("{l} (paper)"),
        value: v,
        colour: GREY,
        text: Some(t.to_string()),
    };
    bars(
        &a.out.join("kestrel-export.svg"),
        "Export bandwidth per mode, Mbit/s (ours: quickstart replay, 100 ms windows)",
        "Mbit/s (log)",
        &[
            ours("sketches", sk),
            paper("sketches", 6.0, "~6"),
            ours("3GPP-PM", pm),
            paper("3GPP-PM", 1.0, "~1"),
            ours("postcards", pc),
            paper("postcards", 70.0, "60-80"),
        ],
        None,
        true,
    );
}

fn upf(a: &Args, p: &Path) {
    let v = read_json(p);
    let mut rows = vec![];
    for c in v["cases"]
        .as_array()
        .unwrap_or_else(|| fail(&format!("{}: no cases", p.display())))
    {
        let dir = c["direction"].as_str().unwrap_or("?");
        for (i, r) in c["round_pair_ratios"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            rows.push(Bar {
                label: format!("{dir} round {i}"),
                value: r.as_f64().unwrap_or(0.0),
                colour: if dir == "ul" { NAVY } else { ORANGE },
                text: None,
            });
        }
    }
    bars(
        &a.out.join("kestrel-upf.svg"),
        "UPF + Kestrel / UPF alone, paired rounds (pg-upf, 64 B, 10k sessions)",
        "throughput ratio",
        &rows,
        Some((0.9, "goal 0.9")),
        false,
    );
}

fn main() {
    let a = Args::parse();
    bench(&a);
    if let Some(l) = &a.export_log {
        export(&a, l);
    }
    if let Some(u) = &a.upf {
        upf(&a, u);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_is_parsed() {
        let l = "x\nkestrel: 12 windows (0 late parts), 9960 packets; export 13.112 Mbit/s sketches, 0.024 Mbit/s pm, 5.100 Mbit/s postcards (8709 sent, 0 dropped, 1251 under delta); 0 re-binnings, 0 bank stalls\n";
        assert_eq!(parse_export(l), Some((13.112, 0.024, 5.1)));
        assert_eq!(parse_export("kestrel: nothing"), None);
    }
}
