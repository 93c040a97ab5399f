//! `peregrine-p4`: write the P4 twin's constants and table entries from a Peregrine config,
//! and check the P4 sources declare what is written.

use clap::{Parser, Subcommand};
use peregrine_p4gen::bfrt::{self, DevPorts, Program};
use peregrine_p4gen::config::Config;
use peregrine_p4gen::model::{self, Options};
use peregrine_p4gen::{bmv2, check, constants, names, p4decl, telemetry};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "peregrine-p4",
    about = "P4 twin generator and checks for Peregrine"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Print p4/include/constants.p4.
    Constants,
    /// Write upf.bfrt.json, upf_telemetry.bfrt.json, int_transit.bfrt.json and
    /// upf_int.bmv2.txt for a config.
    Entries {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        out_dir: PathBuf,
        /// INT namespace whose hop data this node adds (repeatable).
        #[arg(long = "int-namespace")]
        int_namespaces: Vec<u16>,
        /// Tofino device port of a config port, NAME=DEV_PORT (repeatable; default: index).
        #[arg(long = "dev-port")]
        dev_ports: Vec<String>,
    },
    /// Check that the P4 programs declare every name the generator writes.
    Check {
        #[arg(long, default_value = "p4")]
        p4_dir: PathBuf,
    },
}

fn entries(
    config: &Path,
    out_dir: &Path,
    opts: Options,
    dev_ports: &[String],
) -> Result<(), String> {
    let text = std::fs::read_to_string(config)
        .map_err(|e| format!("cannot read {}: {e}", config.display()))?;
    let cfg = Config::parse_checked(&text).map_err(|e| e.to_string())?;
    let mut dev = DevPorts::new();
    for d in dev_ports {
        let (name, port) = d
            .split_once('=')
            .ok_or_else(|| format!("--dev-port `{d}`: expected NAME=DEV_PORT"))?;
        let i = cfg
            .port_index(name)
            .ok_or_else(|| format!("--dev-port `{d}`: no port named `{name}`"))?;
        let p: u16 = port
            .parse()
            .map_err(|_| format!("--dev-port `{d}`: `{port}` is not a port number"))?;
        dev.insert(i, p);
    }
    let e = model::build(&cfg, &opts).map_err(|e| e.to_string())?;
    let t = telemetry::build(&cfg).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let write = |name: &str, text: String| {
        let p = out_dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
    };
    let json = |p| serde_json::to_string_pretty(&bfrt::render(&e, p, &dev)).unwrap_or_default();
    write("upf.bfrt.json", json(Program::Upf))?;
    write("int_transit.bfrt.json", json(Program::IntTransit))?;
    write(
        "upf_telemetry.bfrt.json",
        serde_json::to_string_pretty(&bfrt::render_telemetry(&e, &t, &dev)).unwrap_or_default(),
    )?;
    write("upf_int.bmv2.txt", bmv2::render(&e))?;
    let offloaded = |v: usize, cpu: usize| format!("{} ({} to cpu)", v, cpu);
    let cpu = |a: &[model::PdrAction]| a.iter().filter(|a| **a == model::PdrAction::ToCpu).count();
    let ul: Vec<_> = e.ul.iter().map(|p| p.action).collect();
    let v4: Vec<_> = e.dl_v4.iter().map(|p| p.action).collect();
    let v6: Vec<_> = e.dl_v6.iter().map(|p| p.action).collect();
    println!(
        "uplink {}, downlink v4 {}, downlink v6 {}, fars {}, meters {}, routes {}",
        offloaded(ul.len(), cpu(&ul)),
        offloaded(v4.len(), cpu(&v4)),
        offloaded(v6.len(), cpu(&v6)),
        e.fars.len(),
        e.meters.len(),
        e.routes.len()
    );
    println!(
        "telemetry: kestrel {} QIDs, fridge {}, dta {}",
        t.kestrel.len(),
        t.fridge.as_ref().map_or("off".into(), |f| format!(
            "`{}` M={} ({} factor rules)",
            f.slice,
            f.m,
            f.table.rules.len()
        )),
        t.dta
            .as_ref()
            .map_or("off".into(), |d| format!("to {}", d.dst_ip))
    );
    Ok(())
}

fn check_all(dir: &Path) -> Result<(), String> {
    let mut errs = Vec::new();
    let upf_telemetry: Vec<names::Table> = names::UPF_TABLES
        .iter()
        .chain(names::TELEMETRY_TABLES)
        .copied()
        .collect();
    let telemetry_externs: Vec<check::Extern> = check::UPF_EXTERNS
        .iter()
        .chain(check::TELEMETRY_EXTERNS)
        .copied()
        .collect();
    type Program<'a> = (&'a str, &'a [names::Table], &'a [check::Extern]);
    let progs: [Program; 4] = [
        ("tna/upf.p4", names::UPF_TABLES, check::UPF_EXTERNS),
        ("tna/upf_telemetry.p4", &upf_telemetry, &telemetry_externs),
        ("tna/int_transit.p4", names::INT_PROGRAM_TABLES, &[]),
        ("v1model/upf_int.p4", names::UPF_TABLES, check::UPF_EXTERNS),
    ];
    for (file, tables, externs) in progs {
        let p = dir.join(file);
        let src = p4decl::read_program(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let d = p4decl::scan(&src);
        let mut e = check::check(&d, tables, externs);
        e.extend(p4decl::unknown_references(&src, &d));
        e.extend(
            p4decl::undefined_pg_names(&src)
                .into_iter()
                .map(|n| format!("{n} is not defined")),
        );
        if file.starts_with("v1model") {
            e.extend(check::check(&d, names::INT_TABLES, &[]));
        }
        errs.extend(e.into_iter().map(|e| format!("{file}: {e}")));
    }
    if errs.is_empty() {
        println!("structural check: ok (a declaration scan, not a compile)");
        Ok(())
    } else {
        Err(errs.join("\n"))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Constants => {
            print!("{}", constants::constants_p4());
            Ok(())
        }
        Cmd::Entries {
            config,
            out_dir,
            int_namespaces,
            dev_ports,
        } => entries(&config, &out_dir, Options { int_namespaces }, &dev_ports),
        Cmd::Check { p4_dir } => check_all(&p4_dir),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("peregrine-p4: {e}");
            ExitCode::FAILURE
        }
    }
}
