//! Planning and rendering cost at 1k, 10k and 100k managed objects.
//!
//! Run: `cargo bench --bench plan` (a few minutes on 2 cores). Criterion writes
//! its estimates under `target/criterion/<group>/<size>/new/estimates.json`;
//! `scripts/bench-plan-table.sh` turns them into a markdown table.
//!
//! The input is a synthetic listing, built once per size, with the mix a busy
//! host has (see `synthetic`): boxes of one container, one named volume and one
//! network, some declared (kept), some leaked without a box label, volumes and
//! networks shared by several boxes, one network every box is attached to,
//! Docker's own `bridge` network (unlabeled, so never planned), volumes listed
//! in `volumes.keep`, volumes and networks used by an unmanaged container
//! (blocked), look-alike decoys (`ca.sandbox=0`, `true`, `ca.sandboxx`, another
//! owner) and `ca-sbx:*` images. The size is the number of *managed*
//! containers plus volumes, as before networks were planned (so the README's
//! numbers stay comparable: the same boxes, now each with a network); the
//! managed networks (about one per box) and the decoys (about 10 %) come on top.
//!
//! Groups, each measured separately, with throughput in the size:
//! - `inventory`: `Inventory::from_listings` (client-side label check,
//!   dependency resolution, unmanaged holders), from owned listings (their
//!   clone is not timed);
//! - `plan_build`: `Plan::build` from that inventory (graph, toposort, basis digests);
//! - `render_json`: `render::plan_json` of that plan;
//! - `render_human`: `render::plan_human` of that plan;
//! - `plan_build_leased`: `Plan::build` of the same listing where every box
//!   also has a lease volume (`ca.sandbox.lease.ttl`), half of them live and
//!   half run out: the cost of judging leases (the plan keeps the live ones);
//! - `pipeline`: the three stages together, from_listings + build + plan_json +
//!   plan_human: everything `sandboxctl plan` does after the engine answered
//!   (it prints one of the two renderings; both are included).
//!
//! No engine is involved: listing costs a constant five engine calls whatever
//! the size, and the in-memory engine would only add its own clone of the world.
//!
//! The bench uses the binary's allocator (mimalloc, see `src/main.rs`), so its
//! numbers are what `sandboxctl plan` spends. To measure with the system
//! allocator instead, remove the `#[global_allocator]` below.

/// The allocator the binary uses (`src/main.rs`), so the numbers are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::time::Duration;

use criterion::{
    criterion_group, criterion_main, BatchSize, Bencher, BenchmarkId, Criterion, SamplingMode,
    Throughput,
};
use sandboxctl::model::{ImageInfo, Kind, Labels, Object, ObjectKey, Scope, DEFAULT_ENGINE};
use sandboxctl::plan::inventory::Inventory;
use sandboxctl::plan::{DeclaredBox, Goal, KeptVolume, Plan};
use sandboxctl::render;

/// Managed containers + volumes per benchmark size (networks come on top).
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// The scope every benchmark plans for: `ca.sandbox=1` and one owner label.
const OWNER_KEY: &str = "ca.sandbox.owner";
const OWNER: &str = "bench";

/// The time plans are made for: 2025-12-01T00:00:00Z, after every creation time.
const NOW: i64 = 1_764_547_200;

/// Raw listings as the engine would return them, plus the goal to plan for.
#[derive(Clone)]
struct Listings {
    scope: Scope,
    goal: Goal,
    /// What the scope's label filter returned for containers, volumes and
    /// networks (a few decoys slip through, as with a daemon that ignores
    /// filters: the client-side check drops them).
    listed: Vec<Object>,
    /// Every container on the host.
    all: Vec<Object>,
    images: Vec<ImageInfo>,
    /// Managed containers + volumes (what the size means).
    managed_objects: usize,
    /// Managed networks (on top of the size).
    networks: usize,
}

impl Listings {
    /// The same listing with a lease volume for every box: box `i`'s lease
    /// was made 10 minutes before `NOW`, with a ttl of 15 minutes (live) for
    /// even boxes and 5 minutes (run out) for odd ones.
    fn with_leases(&self) -> Listings {
        let mut l = self.clone();
        let boxes: Vec<(String, Labels)> = self
            .listed
            .iter()
            .filter(|o| o.kind() == Kind::Container)
            .filter_map(|o| {
                let b = o.labels.get("ca.sandbox.id")?;
                Some((b.clone(), o.labels.clone()))
            })
            .collect();
        for (i, (b, mut labels)) in boxes.into_iter().enumerate() {
            let name = format!("ca-sbx-lease-{b}-{i:x}");
            let ttl = if i % 2 == 0 { "15m" } else { "5m" };
            labels.insert("ca.sandbox.lease.ttl".into(), ttl.into());
            l.listed
                .push(object(Kind::Volume, &name, &name, labels, Some(NOW - 600)));
        }
        l
    }

    fn inventory(self) -> Inventory {
        Inventory::from_listings(
            DEFAULT_ENGINE,
            self.scope,
            self.listed,
            self.all,
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

/// Creation times spread over November 2025 (Unix seconds).
fn created_at(i: usize) -> i64 {
    const NOV_1_2025: i64 = 1_761_955_200;
    let day = (i % 28) as i64;
    let secs = ((i % 24) * 3600 + ((i / 24) % 60) * 60 + (i / 1440) % 60) as i64;
    NOV_1_2025 + day * 86_400 + secs
}

fn key(kind: Kind, id: &str) -> ObjectKey {
    ObjectKey::new(DEFAULT_ENGINE, kind, id)
}

fn object(kind: Kind, id: &str, name: &str, labels: Labels, created: Option<i64>) -> Object {
    let mut o = Object::new(DEFAULT_ENGINE, kind, id, name);
    o.labels = labels;
    o.created = created;
    o
}

fn container(id: &str, name: &str, state: &str, labels: Labels, uses: Vec<ObjectKey>) -> Object {
    let mut o = object(Kind::Container, id, name, labels, None);
    o.state = Some(state.into());
    o.depends_on = uses;
    o.depends_on.sort();
    o
}

/// A host holding `target` managed containers + volumes (give or take one),
/// and about one managed network per box on top.
///
/// Box `i` is a container `sbx-box-NNNNNN` mounting its volume
/// `ca-sbx-box-NNNNNN`, attached to its network `ca-sbx-net-NNNNNN`, to its
/// group's network (one per 50 boxes), to the host-wide `ca-sbx-egress` and to
/// Docker's `bridge`. Of the boxes: every 10th (i % 10 == 3) is declared in
/// the state file (kept, and so are the shared networks it is attached to);
/// every 17th has no `ca.sandbox.id` (leaked); every 10th (i % 10 == 0) also
/// mounts a volume shared by the 5 such boxes of its group of 50; every 50th
/// (i % 50 == 7) has its volume in `volumes.keep`; every 200th (i % 200 == 11)
/// has its volume mounted and its network joined by an unmanaged container
/// (both blocked). States: 70 % running, 25 % exited, 5 % created. One decoy
/// object per 10 boxes of each kind: `ca.sandbox=0`, `=true`, `=1 `,
/// `ca.sandboxx=1`, another owner.
fn synthetic(target: usize) -> Listings {
    let scope = Scope::new(labels(&[(OWNER_KEY, OWNER)]));
    let mut declared = Vec::new();
    let mut keep_volumes = Vec::new();
    let mut managed = Vec::new();
    let mut foreign = Vec::new();
    let mut volumes = Vec::new();
    let mut networks = Vec::new();
    let egress = hex_id(8, 0);
    let bridge = hex_id(9, 0);
    networks.push(object(
        Kind::Network,
        &egress,
        "ca-sbx-egress",
        managed_labels(None, "all"),
        Some(created_at(0)),
    ));
    let mut count = 0;
    let mut i = 0;
    while count < target {
        let box_id = format!("box-{i:06}");
        let leaked = i % 17 == 5;
        let b = (!leaked).then_some(box_id.as_str());
        let repo = format!("repo-{}", i % 97);
        let own = format!("ca-sbx-box-{i:06}");
        let own_net = hex_id(6, i as u64);
        let group_net = hex_id(7, (i / 50) as u64);
        let mut uses = vec![
            key(Kind::Volume, &own),
            key(Kind::Network, &own_net),
            key(Kind::Network, &group_net),
            key(Kind::Network, &egress),
            key(Kind::Network, &bridge),
        ];
        if i % 50 == 0 {
            volumes.push(object(
                Kind::Volume,
                &format!("ca-sbx-shared-{:05}", i / 50),
                &format!("ca-sbx-shared-{:05}", i / 50),
                managed_labels(b, &repo),
                Some(created_at(i)),
            ));
            networks.push(object(
                Kind::Network,
                &group_net,
                &format!("ca-sbx-group-{:05}", i / 50),
                managed_labels(b, &repo),
                Some(created_at(i)),
            ));
            count += 1;
        }
        if i % 10 == 0 {
            uses.push(key(Kind::Volume, &format!("ca-sbx-shared-{:05}", i / 50)));
        }
        if i % 10 == 3 {
            declared.push(DeclaredBox::new(&box_id));
        }
        if i % 50 == 7 {
            keep_volumes.push(KeptVolume::new(&own));
        }
        if i % 200 == 11 {
            foreign.push(container(
                &hex_id(3, i as u64),
                &format!("backup-{i:06}"),
                "running",
                labels(&[("com.example.role", "backup")]),
                vec![key(Kind::Volume, &own), key(Kind::Network, &own_net)],
            ));
        }
        let state = match i % 20 {
            0..=13 => "running",
            14..=18 => "exited",
            _ => "created",
        };
        let mut c = container(
            &hex_id(1, i as u64),
            &format!("sbx-box-{i:06}"),
            state,
            managed_labels(b, &repo),
            uses,
        );
        c.created = Some(created_at(i));
        managed.push(c);
        volumes.push(object(
            Kind::Volume,
            &own,
            &own,
            managed_labels(b, &repo),
            Some(created_at(i)),
        ));
        networks.push(object(
            Kind::Network,
            &own_net,
            &format!("ca-sbx-net-{i:06}"),
            managed_labels(b, &repo),
            Some(created_at(i)),
        ));
        count += 2;
        i += 1;
    }
    let boxes = i;
    let managed_networks = networks.len();

    // Look-alikes: never managed. Containers appear in the full listing; a
    // third of them (and of the decoy volumes and networks) also in the
    // filtered listings, as from a daemon that ignored the filter.
    let decoy_labels = |d: usize| match d % 5 {
        0 => labels(&[("ca.sandbox", "0"), (OWNER_KEY, OWNER)]),
        1 => labels(&[("ca.sandbox", "true"), (OWNER_KEY, OWNER)]),
        2 => labels(&[("ca.sandbox", "1 "), (OWNER_KEY, OWNER)]),
        3 => labels(&[("ca.sandboxx", "1"), (OWNER_KEY, OWNER)]),
        _ => labels(&[("ca.sandbox", "1"), (OWNER_KEY, "someone-else")]),
    };
    let mut all = managed.clone();
    all.extend(foreign);
    let mut listed = managed;
    for d in 0..boxes / 10 {
        let volume = format!("lookalike-{d:06}");
        let network = hex_id(10, d as u64);
        let c = container(
            &hex_id(2, d as u64),
            &format!("ca-sbx-lookalike-{d:06}"),
            "running",
            decoy_labels(d),
            vec![key(Kind::Volume, &volume), key(Kind::Network, &network)],
        );
        if d % 3 == 0 {
            listed.push(c.clone());
            listed.push(object(
                Kind::Volume,
                &volume,
                &volume,
                decoy_labels(d),
                None,
            ));
            listed.push(object(
                Kind::Network,
                &network,
                &format!("lookalike-net-{d:06}"),
                decoy_labels(d),
                None,
            ));
        }
        all.push(c);
    }
    listed.extend(volumes);
    listed.extend(networks);
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
            grace: None,
            max_lease: None,
            archive: None,
        },
        listed,
        all,
        images,
        managed_objects: count,
        networks: managed_networks,
    }
}

fn bench(c: &mut Criterion) {
    let inputs: Vec<Input> = SIZES
        .iter()
        .map(|&n| {
            let listings = synthetic(n);
            let inventory = listings.clone().inventory();
            let plan = Plan::build(&listings.goal, &inventory, NOW);
            (n, listings, inventory, plan)
        })
        .collect();
    for (n, listings, inventory, plan) in &inputs {
        let counts = |count: &dyn Fn(Kind) -> usize| {
            Kind::ALL
                .iter()
                .map(|&k| format!("{} {}", count(k), k.plural()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        eprintln!(
            "size {n}: {} managed containers + volumes and {} managed networks ({}), {} containers listed in all; plan: remove {}; {} blocked, {} kept, {} rejected",
            listings.managed_objects,
            listings.networks,
            counts(&|k| inventory.of_kind(k).count()),
            listings.all.len(),
            counts(&|k| plan.removal_count(k)),
            plan.blocked.len(),
            plan.kept.len(),
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
        b.iter(|| black_box(Plan::build(&l.goal, inv, NOW)))
    });
    let leased: Vec<Input> = inputs
        .iter()
        .map(|(n, l, _, _)| {
            let leased = l.with_leases();
            let inventory = leased.clone().inventory();
            let plan = Plan::build(&leased.goal, &inventory, NOW);
            eprintln!(
                "size {n} with leases: {} lease volumes; plan keeps {}",
                plan.leases.len(),
                plan.kept.len()
            );
            (*n, leased, inventory, plan)
        })
        .collect();
    group(c, "plan_build_leased", &leased, |b, (_, l, inv, _)| {
        b.iter(|| black_box(Plan::build(&l.goal, inv, NOW)))
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
                let plan = Plan::build(&goal, &l.inventory(), NOW);
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
