//! `pg-plan`: the sketch-INT co-design planner's command line (`docs/codesign.md`).
//!
//! `pg-plan plan TOPOLOGY.json [--alpha A]` prints the plan as JSON; `pg-plan gen fat-tree
//! --k 4` and `pg-plan gen wan --nodes 30` print generated topology files.
//! Exit codes: 0 success, 1 bad topology file or no plan, 2 bad usage.

use clap::{Parser, Subcommand};
use peregrine_planner::{gen, plan_with, select::SubgradientParams, Topology};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "pg-plan", about = "Sketch-INT co-design planner")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Plan measurement points and collection paths for a topology file.
    Plan {
        topology: PathBuf,
        /// Override the file's params.alpha.
        #[arg(long)]
        alpha: Option<f64>,
    },
    /// Print a generated topology file.
    #[command(subcommand)]
    Gen(GenCmd),
}

#[derive(Subcommand, Debug)]
enum GenCmd {
    /// k-ary fat-tree.
    FatTree {
        #[arg(long, default_value_t = 4)]
        k: usize,
        #[arg(long)]
        flows: Option<usize>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Random WAN (Waxman).
    Wan {
        #[arg(long, default_value_t = 30)]
        nodes: usize,
        #[arg(long, default_value_t = 200)]
        flows: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Plan { topology, alpha } => {
            let text = match std::fs::read_to_string(&topology) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("pg-plan: {}: {e}", topology.display());
                    return ExitCode::from(1);
                }
            };
            let t = match Topology::from_json(&text) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("pg-plan: {}: {e}", topology.display());
                    return ExitCode::from(1);
                }
            };
            let alpha = alpha.unwrap_or(t.params.alpha);
            if !(0.0..=1.0).contains(&alpha) {
                eprintln!("pg-plan: --alpha must be in [0, 1]");
                return ExitCode::from(2);
            }
            match plan_with(&t, alpha, SubgradientParams::default()) {
                Ok(p) => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&p).expect("plan serialises")
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("pg-plan: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Cmd::Gen(g) => {
            if matches!(g, GenCmd::FatTree { k, .. } if k < 2 || !k.is_multiple_of(2))
                || matches!(g, GenCmd::Wan { nodes, .. } if nodes < 3)
            {
                eprintln!("pg-plan: fat-tree k must be even and >= 2; a WAN needs >= 3 nodes");
                return ExitCode::from(2);
            }
            let f = match g {
                GenCmd::FatTree { k, flows, seed } => {
                    gen::fat_tree_with(k, seed, flows.unwrap_or(4 * k * k))
                }
                GenCmd::Wan { nodes, flows, seed } => gen::wan(nodes, flows, seed),
            };
            println!(
                "{}",
                serde_json::to_string_pretty(&f).expect("file serialises")
            );
            ExitCode::SUCCESS
        }
    }
}
