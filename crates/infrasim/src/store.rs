//! `infrasim store check`: verifies a data directory's stores (the management plane's, and
//! the workload clusters' beside it) the way a start does, reading every page and writing
//! nothing, and says what each holds or what is wrong with it.
//!
//! A start never repairs a damaged store (it stops and leaves the files as they are); this
//! command is how a user finds out, before or after such a start, which file is at fault.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    action: StoreAction,
}

#[derive(Debug, Subcommand)]
enum StoreAction {
    /// Verify every page of the stores in DATA_DIR (while no `up` uses it) and report what
    /// they hold; exits 1 if one cannot be read. Nothing is written to them.
    Check {
        /// The data directory (as `up --data-dir`).
        #[arg(long, env = "INFRASIM_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
}

pub fn run(args: StoreArgs) -> anyhow::Result<()> {
    match args.action {
        StoreAction::Check { data_dir } => {
            let dir = data_dir.unwrap_or_else(crate::up::default_data_dir);
            check(&dir)
        }
    }
}

fn check(dir: &Path) -> anyhow::Result<()> {
    let mut stores = vec![
        ("management plane".to_string(), dir.to_path_buf()),
        (
            "workload clusters".to_string(),
            dir.join(crate::up::CLUSTERS_DIR),
        ),
    ];
    stores.extend(shard_homes(dir));
    let mut found = 0;
    let mut damaged = 0;
    for (what, dir) in stores {
        if !dir.join(infrasim_durable::FILE).exists() {
            continue;
        }
        found += 1;
        // The window only bounds the events a replay keeps (in memory, here): keep them all.
        match infrasim_durable::check(&dir, 1 << 40) {
            Ok(v) => {
                println!(
                    "{what}: {} is sound: {} groups, {} objects, {} log frames not yet in the database{}",
                    dir.join(infrasim_durable::FILE).display(),
                    v.images.len(),
                    v.objects(),
                    v.pending_frames,
                    v.torn
                        .as_ref()
                        .map(|(f, at)| format!(
                            " (a torn last frame at {}:{at} will be dropped)",
                            f.display()
                        ))
                        .unwrap_or_default()
                );
            }
            Err(e) => {
                damaged += 1;
                println!("{what}: {e}");
            }
        }
    }
    if found == 0 {
        bail!(
            "no store in {} (nor in its {} or {} folders)",
            dir.display(),
            crate::up::CLUSTERS_DIR,
            crate::up::SHARDS_DIR
        );
    }
    if damaged > 0 {
        return Err(anyhow::anyhow!("{damaged} of {found} stores cannot be read"))
            .context("the files are left as they are: restore them from a backup, or move them away to start empty");
    }
    Ok(())
}

/// The homes of a sharded fleet's shards in `dir` (`shards/shard-<k>`), in shard order.
fn shard_homes(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir.join(crate::up::SHARDS_DIR)) else {
        return Vec::new();
    };
    let mut homes: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name();
            let k = name.to_str()?.strip_prefix("shard-")?.parse().ok()?;
            Some((k, e.path()))
        })
        .collect();
    homes.sort();
    homes
        .into_iter()
        .map(|(k, path)| (format!("shard {k}'s clusters"), path))
        .collect()
}
