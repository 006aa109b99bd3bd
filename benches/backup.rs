//! Benchmark (issue 41): what a backup and a restore cost for a data
//! directory of 100 MiB and of 1 GiB, with the product's own code
//! (`crate::docker::backup`: fsfreeze + restic, and the restore's safety
//! snapshot + replacement) on a real loop-mounted ext4 image made as a
//! deploy makes it, and Debian's restic with a repository on a local path.
//! Measured per size: the first backup's time and how long the app's writes
//! waited (the freeze), the second backup's time and what it added after
//! 1% of the files changed (deduplication), and the restore's data part
//! (the app is stopped for it; its stop and start, a second or two with
//! the test images, come on top). Everything lives in a directory under
//! /var/tmp that the bench makes and removes; it writes nothing to an
//! installed host. Needs root (mount, fsfreeze) and restic.
//!
//!     cargo bench --bench backup [-- MIB...]      (default: 100 1024)
//!
//! Targets: the second backup adds at most 5% of the data when 1% of it
//! changed (deduplication works), and writes wait at most 15 s for 100 MiB.
//! A missed target prints FAILED.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sha2::{Digest as _, Sha256};
use volce_lab::docker::{backup, data_volume, restic};
use volce_lab::vocab::{
    AppName, BackupConfig, BackupSpec, DataPath, DataUse, ImageRef, PlanId, RestoreSpec, SnapshotFacts,
};

const FILE_MIB: usize = 1;

/// Unmounts the image and removes the bench's directory whatever happens.
struct Cleanup(PathBuf, PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = data_volume::thaw(&self.1);
        let _ = data_volume::unmount(&self.1);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `count` files of 1 MiB of incompressible bytes, seeded by `seed`.
fn fill(dir: &Path, count: usize, seed: u64) {
    for i in 0..count {
        let mut block = Sha256::digest(format!("{seed}-{i}").as_bytes()).to_vec();
        let mut file = std::fs::File::create(dir.join(format!("f{i:05}"))).unwrap();
        for _ in 0..(FILE_MIB << 20) / 32 {
            block = Sha256::digest(&block).to_vec();
            file.write_all(&block).unwrap();
        }
    }
}

fn spec(data: &DataUse, config: &BackupConfig, run: u32) -> BackupSpec {
    BackupSpec {
        plan_id: PlanId::parse(&format!("{:032x}", 0xbac0_0000_u128 + u128::from(run))).unwrap(),
        app: AppName::parse("bench").unwrap(),
        entry: "bench".into(),
        image: ImageRef::parse(&format!("bench.example/app@sha256:{}", "b".repeat(64))).unwrap(),
        data: Some(data.clone()),
        dumps: Vec::new(),
        config: config.clone(),
        timeout_seconds: 3600,
    }
}

fn main() {
    // `cargo test --all-targets` runs benches without `--bench`: a GiB of
    // data is not a test's to write.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("backup bench: skipped (run it with cargo bench --bench backup)");
        return;
    }
    if !nix::unistd::geteuid().is_root() || !Path::new(restic::RESTIC).exists() {
        println!("backup bench: needs root and restic (apt-get install restic); nothing measured");
        return;
    }
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![100, 1024] } else { sizes };
    let mut failed = false;
    for mib in sizes {
        failed |= measure(mib);
    }
    if failed {
        println!("FAILED: a target above was missed");
        std::process::exit(1);
    }
}

/// One size; whether a target was missed.
fn measure(mib: usize) -> bool {
    let root = PathBuf::from(format!("/var/tmp/volce-lab-backup-bench-{}", std::process::id()));
    let data = DataUse {
        path: DataPath::parse("/data").unwrap(),
        image: root.join("data/bench.ext4"),
        mount: root.join("data/bench"),
        max_mib: (mib + mib / 4 + 64) as u32,
    };
    std::fs::create_dir_all(&root).unwrap();
    let _cleanup = Cleanup(root.clone(), data.mount.clone());
    data_volume::ensure(&data).expect("make and mount the data image");
    let password = root.join("password");
    std::fs::write(&password, "bench-password\n").unwrap();
    std::fs::set_permissions(&password, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let config: BackupConfig = serde_json::from_value(serde_json::json!({
        "repository": root.join("repo"), "password_file": password, "keep": {"last": 10}
    }))
    .unwrap();
    restic::init(&config).expect("restic init");
    fill(&data.mount, mib / FILE_MIB, 1);

    let started = Instant::now();
    let first = backup::run(&spec(&data, &config, 1)).expect("first backup");
    let first_s = started.elapsed().as_secs_f64();
    fill_some(&data.mount, mib / FILE_MIB / 100);
    let started = Instant::now();
    let second = backup::run(&spec(&data, &config, 2)).expect("second backup");
    let second_s = started.elapsed().as_secs_f64();
    let restore_s = restore(&data, &config, first.snapshot.as_ref().expect("a data snapshot"));

    let added = second.added_bytes as f64 / (mib as f64 * 1048576.0) * 100.0;
    println!(
        "{mib} MiB: first backup {first_s:.2} s (writes waited {:.2} s, added {:.1} MiB); second after 1% changed \
         {second_s:.2} s (writes waited {:.2} s, added {:.2} MiB = {added:.2}% of the data); restore's data part \
         {restore_s:.2} s",
        first.writes_paused_ms as f64 / 1000.0,
        first.added_bytes as f64 / 1048576.0,
        second.writes_paused_ms as f64 / 1000.0,
        second.added_bytes as f64 / 1048576.0,
    );
    let mut missed = false;
    if added > 5.0 {
        println!("FAILED: the second backup added {added:.2}% of the data (target 5%)");
        missed = true;
    }
    if mib <= 100 && first.writes_paused_ms > 15_000 {
        println!("FAILED: writes waited {} ms for {mib} MiB (target 15 s)", first.writes_paused_ms);
        missed = true;
    }
    missed
}

/// Rewrites the first `count` files (1% of them) with new bytes.
fn fill_some(dir: &Path, count: usize) {
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    fill(&scratch, count.max(1), 2);
    for i in 0..count.max(1) {
        std::fs::rename(scratch.join(format!("f{i:05}")), dir.join(format!("f{i:05}"))).unwrap();
    }
    std::fs::remove_dir(&scratch).unwrap();
}

/// The restore's data part for `snapshot` (a safety snapshot, then the
/// data replaced); seconds.
fn restore(data: &DataUse, config: &BackupConfig, snapshot: &volce_lab::vocab::SnapshotId) -> f64 {
    let app = AppName::parse("bench").unwrap();
    let facts: SnapshotFacts = restic::snapshot_facts(config, &app, snapshot).unwrap().expect("the snapshot");
    let backup = spec(data, config, 3);
    let spec = RestoreSpec {
        plan_id: backup.plan_id,
        app,
        entry: backup.entry,
        image: backup.image,
        replaced: volce_lab::vocab::Replaced::Data(data.clone()),
        config: config.clone(),
        snapshot: facts,
        stop: vec![],
        start: None,
        timeout_seconds: 3600,
    };
    let started = Instant::now();
    backup::restore_replaced(&spec).expect("restore");
    started.elapsed().as_secs_f64()
}
