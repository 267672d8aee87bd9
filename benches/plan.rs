//! Planning and rendering cost at 1k, 10k and 100k managed objects.
//!
//! Run: `cargo bench --bench plan` (a few minutes on 2 cores). Criterion writes
//! its estimates under `target/criterion/<group>/<size>/new/estimates.json`;
//! `scripts/bench-plan-table.sh` turns them into a markdown table.
//!
//! The input is a synthetic listing, built once per size, with the mix a busy
//! host has (see `synthetic`): boxes of one container and one named volume,
//! some declared (kept), some leaked without a box label, volumes shared by
//! several containers, volumes listed in `volumes.keep`, volumes mounted by an
//! unmanaged container (blocked), look-alike decoys (`ca.sandbox=0`, `true`,
//! `ca.sandboxx`, another owner) and `ca-sbx:*` images. The size is the number
//! of *managed* containers plus volumes; decoys come on top (about 10 %).
//!
//! Groups, each measured separately, with throughput in managed objects:
//! - `inventory`: `Inventory::from_listings` (client-side label check, foreign
//!   users, basis inputs), from owned listings (their clone is not timed);
//! - `plan_build`: `Plan::build` from that inventory (graph, toposort, basis digests);
//! - `render_json`: `render::plan_json` of that plan;
//! - `render_human`: `render::plan_human` of that plan;
//! - `pipeline`: the three stages together, from_listings + build + plan_json +
//!   plan_human: everything `sandboxctl plan` does after the engine answered
//!   (it prints one of the two renderings; both are included).
//!
//! No engine is involved: listing costs a constant four engine calls whatever
//! the size, and the in-memory engine would only add its own clone of the world.

use std::collections::BTreeSet;
use std::hint::black_box;
use std::time::Duration;

use criterion::{
    criterion_group, criterion_main, BatchSize, Bencher, BenchmarkId, Criterion, SamplingMode,
    Throughput,
};
use sandboxctl::inventory::Inventory;
use sandboxctl::model::{ContainerInfo, ImageInfo, Labels, Scope, VolumeInfo};
use sandboxctl::plan::{Goal, Plan};
use sandboxctl::render;

/// Managed objects (containers + volumes) per benchmark size.
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// The scope every benchmark plans for: `ca.sandbox=1` and one owner label.
const OWNER_KEY: &str = "ca.sandbox.owner";
const OWNER: &str = "bench";

/// Raw listings as the engine would return them, plus the goal to plan for.
#[derive(Clone)]
struct Listings {
    scope: Scope,
    goal: Goal,
    /// What the scope's label filter returned (a few decoys slip through, as
    /// with a daemon that ignores filters: the client-side check drops them).
    managed: Vec<ContainerInfo>,
    /// Every container on the host.
    all: Vec<ContainerInfo>,
    volumes: Vec<VolumeInfo>,
    images: Vec<ImageInfo>,
    /// Managed containers + volumes (what the size means).
    managed_objects: usize,
}

impl Listings {
    fn inventory(self) -> Inventory {
        Inventory::from_listings(
            self.scope,
            self.managed,
            self.all,
            self.volumes,
            self.images,
        )
    }
}

/// A deterministic 64-hex-digit ID (like Docker's) from a kind and a number.
fn hex_id(kind: u64, n: u64) -> String {
    // splitmix64: cheap, deterministic, well spread.
    let mut x = kind
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(n.wrapping_mul(0xBF58_476D_1CE4_E5B9));
    let mut out = String::with_capacity(64);
    for _ in 0..4 {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.push_str(&format!("{z:016x}"));
    }
    out
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Labels of a managed object of box `b` (none if `b` is `None`: a leak).
fn managed_labels(b: Option<&str>, repo: &str) -> Labels {
    let mut l = labels(&[
        ("ca.sandbox", "1"),
        (OWNER_KEY, OWNER),
        ("ca.sandbox.repo", repo),
        ("org.opencontainers.image.title", "ca-sbx"),
    ]);
    if let Some(b) = b {
        l.insert("ca.sandbox.id".into(), b.into());
    }
    l
}

fn created_at(i: usize) -> String {
    format!(
        "2025-11-{:02}T{:02}:{:02}:{:02}Z",
        1 + i % 28,
        i % 24,
        (i / 24) % 60,
        (i / 1440) % 60
    )
}

/// A host holding `target` managed containers + volumes (give or take one).
///
/// Box `i` is a container `sbx-box-NNNNNN` mounting its volume `ca-sbx-box-NNNNNN`.
/// Of the boxes: every 10th (i % 10 == 3) is declared in the state file (kept);
/// every 17th has no `ca.sandbox.id` (leaked); every 10th (i % 10 == 0) also
/// mounts a volume shared by the 5 such boxes of its group of 50; every 50th
/// (i % 50 == 7) has its volume in `volumes.keep`; every 200th (i % 200 == 11)
/// has its volume also mounted by an unmanaged container (blocked). States:
/// 70 % running, 25 % exited, 5 % created. One decoy object per 10 boxes of
/// each kind: `ca.sandbox=0`, `=true`, `=1 `, `ca.sandboxx=1`, another owner.
fn synthetic(target: usize) -> Listings {
    let scope = Scope::new(labels(&[(OWNER_KEY, OWNER)]));
    let mut declared = BTreeSet::new();
    let mut keep_volumes = BTreeSet::new();
    let mut managed = Vec::new();
    let mut foreign = Vec::new();
    let mut volumes = Vec::new();
    let mut count = 0;
    let mut i = 0;
    while count < target {
        let box_id = format!("box-{i:06}");
        let leaked = i % 17 == 5;
        let b = (!leaked).then_some(box_id.as_str());
        let repo = format!("repo-{}", i % 97);
        let own = format!("ca-sbx-box-{i:06}");
        let mut mounts: BTreeSet<String> = [own.clone()].into();
        if i % 50 == 0 {
            volumes.push(VolumeInfo {
                name: format!("ca-sbx-shared-{:05}", i / 50),
                labels: managed_labels(b, &repo),
                created_at: Some(created_at(i)),
            });
            count += 1;
        }
        if i % 10 == 0 {
            mounts.insert(format!("ca-sbx-shared-{:05}", i / 50));
        }
        if i % 10 == 3 {
            declared.insert(box_id.clone());
        }
        if i % 50 == 7 {
            keep_volumes.insert(own.clone());
        }
        if i % 200 == 11 {
            foreign.push(ContainerInfo {
                id: hex_id(3, i as u64),
                name: format!("backup-{i:06}"),
                state: "running".into(),
                labels: labels(&[("com.example.role", "backup")]),
                mounts: [own.clone()].into(),
            });
        }
        managed.push(ContainerInfo {
            id: hex_id(1, i as u64),
            name: format!("sbx-box-{i:06}"),
            state: match i % 20 {
                0..=13 => "running",
                14..=18 => "exited",
                _ => "created",
            }
            .into(),
            labels: managed_labels(b, &repo),
            mounts,
        });
        volumes.push(VolumeInfo {
            name: own,
            labels: managed_labels(b, &repo),
            created_at: Some(created_at(i)),
        });
        count += 2;
        i += 1;
    }
    let boxes = i;

    // Look-alikes: never managed. Containers appear in the full listing; a
    // third of them (and of the decoy volumes) also in the filtered listings,
    // as from a daemon that ignored the filter.
    let decoy_labels = |d: usize| match d % 5 {
        0 => labels(&[("ca.sandbox", "0"), (OWNER_KEY, OWNER)]),
        1 => labels(&[("ca.sandbox", "true"), (OWNER_KEY, OWNER)]),
        2 => labels(&[("ca.sandbox", "1 "), (OWNER_KEY, OWNER)]),
        3 => labels(&[("ca.sandboxx", "1"), (OWNER_KEY, OWNER)]),
        _ => labels(&[("ca.sandbox", "1"), (OWNER_KEY, "someone-else")]),
    };
    let mut all = managed.clone();
    all.extend(foreign);
    for d in 0..boxes / 10 {
        let c = ContainerInfo {
            id: hex_id(2, d as u64),
            name: format!("ca-sbx-lookalike-{d:06}"),
            state: "running".into(),
            labels: decoy_labels(d),
            mounts: [format!("lookalike-{d:06}")].into(),
        };
        let v = VolumeInfo {
            name: format!("lookalike-{d:06}"),
            labels: decoy_labels(d),
            created_at: None,
        };
        if d % 3 == 0 {
            managed.push(c.clone());
            volumes.push(v);
        }
        all.push(c);
    }
    let images = (0..20)
        .map(|k| ImageInfo {
            id: format!("sha256:{}", hex_id(4, k)),
            tags: vec![format!("ca-sbx:repo-{k}-{}", &hex_id(5, k)[..12])],
        })
        .collect();
    Listings {
        scope,
        goal: Goal::Reconcile {
            boxes: declared,
            keep_volumes,
        },
        managed,
        all,
        volumes,
        images,
        managed_objects: count,
    }
}

fn bench(c: &mut Criterion) {
    let inputs: Vec<Input> = SIZES
        .iter()
        .map(|&n| {
            let listings = synthetic(n);
            let inventory = listings.clone().inventory();
            let plan = Plan::build(&listings.goal, &inventory);
            (n, listings, inventory, plan)
        })
        .collect();
    for (n, listings, inventory, plan) in &inputs {
        let (rc, rv) = plan.removal_counts();
        eprintln!(
            "size {n}: {} managed objects ({} containers, {} volumes), {} containers listed in all; plan: remove {rc} containers + {rv} volumes, {} blocked, {} kept, {} rejected",
            listings.managed_objects,
            inventory.containers.len(),
            inventory.volumes.len(),
            listings.all.len(),
            plan.blocked.len(),
            plan.kept.containers.len() + plan.kept.volumes.len(),
            inventory.rejected.len(),
        );
    }

    group(c, "inventory", &inputs, |b, (_, l, _, _)| {
        b.iter_batched(
            || l.clone(),
            |l| black_box(l.inventory()),
            BatchSize::LargeInput,
        )
    });
    group(c, "plan_build", &inputs, |b, (_, l, inv, _)| {
        b.iter(|| black_box(Plan::build(&l.goal, inv)))
    });
    group(c, "render_json", &inputs, |b, (_, _, _, p)| {
        b.iter(|| black_box(render::plan_json(p)))
    });
    group(c, "render_human", &inputs, |b, (_, _, _, p)| {
        b.iter(|| black_box(render::plan_human(p)))
    });
    group(c, "pipeline", &inputs, |b, (_, l, _, _)| {
        b.iter_batched(
            || l.clone(),
            |l| {
                let goal = l.goal.clone();
                let plan = Plan::build(&goal, &l.inventory());
                black_box((render::plan_json(&plan), render::plan_human(&plan)))
            },
            BatchSize::LargeInput,
        )
    });
}

type Input = (usize, Listings, Inventory, Plan);

/// One benchmark group over every size, with the shared settings and the
/// throughput in managed objects; `bench` times one size.
fn group(
    c: &mut Criterion,
    name: &str,
    inputs: &[Input],
    mut bench: impl FnMut(&mut Bencher, &Input),
) {
    let mut group = c.benchmark_group(name);
    settings(&mut group);
    for input in inputs {
        group.throughput(Throughput::Elements(input.1.managed_objects as u64));
        group.bench_function(BenchmarkId::from_parameter(input.0), |b| bench(b, input));
    }
    group.finish();
}

/// Few samples, flat sampling: the 100k cases take tens of milliseconds each.
fn settings(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
}

criterion_group!(benches, bench);
criterion_main!(benches);
