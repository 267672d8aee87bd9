//! The hard gate as a matrix: every command that can converge or touches
//! leases, on every engine shape, under every fault of a call it makes, must
//! fail honestly.
//!
//! Axes (see [`Command`], [`Shape`], [`Fault`]):
//! - commands: `apply`, `apply FILE` (saved by `plan --out FILE`), `destroy ID`,
//!   `destroy --prune`, `prune`, `destroy nosuchbox` (a box ID nothing
//!   carries), `watch --once`, and a running `watch` (judged by its
//!   cycle log, `/healthz` and the report it prints when stopped); the
//!   lease commands `lease`, `lease --release` and `hold` (judged by
//!   [`lease_verdict`]); and the archive commands, in memory only:
//!   `restore ARCHIVE --volume doomed-data-restored` (judged by
//!   [`restore_verdict`]) and `apply --archive DIR` (judged by [`verdict`]
//!   and the archive checks of `memory::Setup::archive_problems`); and the
//!   read-only commands, in memory only, which go through the same merge as
//!   `apply`: `plan`, `inventory`, `graph` (DOT and Mermaid) and `explain
//!   box:doomed` (judged by [`read_only_verdict`]);
//! - shapes: one engine (no `[[engine]]`), a fleet of one, a fleet of two
//!   where one engine is faulty and the other healthy;
//! - faults (on the faulty engine): unreachable; listing containers, volumes,
//!   networks or images fails; an inspect fails (the volume re-check right
//!   before its removal); a removal fails (the box's container); the
//!   verification listing fails; the connection is lost at the first removal
//!   (every later call fails); a call passes its deadline (the container listing);
//!   an unrelated container's inspect hangs (a running unlabeled container
//!   made after the box's, which then could have joined it: the box's
//!   container is blocked `holderUnknown`, the rest goes); creating a volume fails; creating the helper container fails; the
//!   upload fails; the upload is cut mid-stream; removing the helper fails;
//!   the download fails; the download is cut mid-stream; no retained
//!   `ca-sbx:*` image. Each command has the faults of the calls it
//!   makes ([`Command::faults`]): the converging ones every fault but the
//!   create, but `destroy nosuchbox`, which inspects and removes nothing:
//!   unreachable, the four listings, the verification listing, the
//!   container listing past its deadline; `lease` unreachable, the create, the listing of the box's
//!   leases, the removal of its old lease, the connection lost at that
//!   removal, the create past its deadline; `lease --release` the same but
//!   the create (its listing past the deadline); `hold` unreachable, the
//!   create, the removal of its lease at the end, the connection lost there,
//!   the create past its deadline; `restore` unreachable, the volume's
//!   create, the helper's create, the upload, the upload cut, the helper's
//!   removal, the upload past its deadline; `apply --archive` the helper
//!   refused, the download failed or cut, no image (the calls of `apply`
//!   itself are `apply`'s cells); the read-only commands unreachable, the
//!   four listings, the container listing past its deadline, the
//!   unrelated container's inspection hanging (`inventory` inspects
//!   nothing: not that one).
//!
//! Every cell must show ([`verdict`]): exit 1 and `converged: false` in the
//! JSON report (a running watch: a failed cycle of the faulty engine in its
//! log, `/healthz` 503, and `converged: false` in its final report); every
//! failure and every leftover named with the faulty engine; no "Converged"
//! claim in the human output (but in the healthy engine's own part); a
//! running watch, stopped by the cell as SIGTERM stops it, exits 1 too
//! (its last cycle's status); a
//! running watch under a fault that leaves discovery incomplete (a listing,
//! an inspection: [`Fault::degrades`]) answers `/healthz` 200, degraded, not
//! 503; in a
//! fleet of two, the healthy engine's part converged and reported under its
//! own name; nothing outside the scope touched. And the fault really happened.
//!
//! Each engine holds the same world: a box `doomed` (container, volume,
//! network), a leaked volume, and what is not managed: a look-alike volume
//! (`ca.sandbox=true`), in memory also a volume of another scope and an
//! unlabeled container. `destroy ID` names `doomed`; `destroy nosuchbox`
//! names a box no engine has and removes nothing; the other commands
//! remove every managed object. A `destroy nosuchbox` cell must also show
//! ([`unknown_verdict`]) every box its report names unknown as
//! `nosuchbox`, `notFound` (never excused: no `--missing-ok`, no audit
//! log), `nosuchbox` named so in a fleet of two (the healthy engine is
//! listed whole), and the human words (through MCP, the call's text)
//! naming it wherever the report does; any other command names no
//! unknown box.
//!
//! The lease commands' world adds box `doomed`'s old lease and three lease
//! look-alikes that must survive (`ca.sandbox=true`, another box's, another
//! scope's). Their cells must show, in a JSON and a human run: exit 1; an
//! error naming the box and the faulty engine, none the healthy one; every
//! claim true (a lease said to hold is on its engine, one said released is
//! gone); `lease`'s JSON document `ok: false` with every error under the
//! faulty engine and, in a fleet of two, `lease --release` done on the
//! healthy engine; `hold` ran its command exactly when it got its lease and
//! names the lease left behind; no volume created but a new lease of the box
//! and nothing removed but the leases the command made and (not `hold`) the
//! box's old one. `lease` and `hold` take a lease on one engine: in a fleet of
//! two they run with `--engine faulty` and make no call on the other.
//! On real engines the lease commands' world has no network for the box
//! (the engines' address pools bound how many networks the cells running at
//! once can make; a lease command touches none, and a call to one would be
//! out of bounds); what was touched is read from the proxies' records (every
//! `POST` a `/volumes/create` on the engine the lease is taken on, every
//! `DELETE` a `/volumes/NAME` of the box's old lease or of a lease of the
//! box that did not exist before the run) and from the engines' volumes
//! (every new volume of the scope a lease of the box, everything else of the
//! world still there).
//!
//! `restore`'s cells must show, in a JSON and a human run: exit 1; an
//! `error:` line (and the JSON `error`) naming the volume and the faulty
//! engine; no "restored" claim, JSON `ok: false`; the volume it created
//! gone again or named left behind (in one clause of an error); a helper
//! left only if named left behind; no removal but of that volume and its
//! helpers, every object of the world still there; no call on the healthy
//! engine. `apply --archive`'s cells, beside [`verdict`]: on the faulty
//! engine the box's volume and the leaked one still there, in
//! `remainingVolumes` as `archiveFailed`, no volume removal, no helper
//! left; in `DIR` nothing of the faulty engine, no partial or temporary
//! file, only complete archive and manifest pairs (a fleet of two: the
//! healthy engine's two volumes archived). Nothing in the world waits for a
//! volume, so "what waits for it is skipped" is not judged here.
//!
//! A read-only command's cells must show, in two runs (JSON and human;
//! `graph`: DOT and Mermaid): exit 1; in a fleet, the faulty engine named
//! in an `error:`, `warning:` or `FAILED` line (or its JSON part's
//! `error`), the healthy one in none; nothing created or removed; in a
//! fleet of two the healthy engine's part still shown.
//!
//! The whole matrix (7 × 3 × 11 + 3 × 7 = 252 converging cells,
//! 3 × (6 + 5 + 5) = 48 lease cells, 3 × (7 + 5) = 36 archive cells, and
//! 3 × (7 + 6 + 7 + 7) = 81 read-only cells: 417; 363 before `prune` and `destroy
//! nosuchbox`, 282 before the read-only ones; 99 more on a swarm manager,
//! 180 more through the MCP server's tools) runs with the
//! in-memory engine through the library's one run path (`run::run_on`), one
//! test per command. The archive and read-only cells have no real cell yet.
//! A slice of it ([`REAL_SLICE`], 37 cells: 20 converging cells with every
//! converging command, shape and fault at least once; 10 lease cells with
//! every lease command, and together every shape and every fault of the
//! lease commands; 7 cells of the real-only shape [`Shape::SshPort`], one
//! engine reached as `ssh://root@127.0.0.1:PORT` through an sshd of the
//! cell's own, which also fail when an `ssh` process outlives the run)
//! runs the built binary against the real engine: the faulty
//! engine is the main Docker engine behind the fault proxy
//! (`support::proxy`), the healthy one the harness's shared second dockerd
//! (`support::engines`) behind a proxy that only records.
//!
//! Results (`ok`: every check holds). The real slice before the one run path
//! (main at d7627da), after it (d440e7c, `run::run_on`; the same at 06abc77),
//! and since a saved fleet plan lets an engine that cannot be listed fail its
//! part alone (55552a0; only a stale, edited or missing part refuses the
//! whole plan):
//!
//! | real cell: command / shape / fault               | before the fix                                                                                   | after |
//! |--------------------------------------------------|--------------------------------------------------------------------------------------------------|-------|
//! | apply / one / a removal fails                    | ok                                                                                               | ok    |
//! | apply / fleet of two / unreachable               | ok                                                                                               | ok    |
//! | apply / fleet of one / listing images fails      | ok                                                                                               | ok    |
//! | apply / fleet of two / verification listing      | ok                                                                                               | ok    |
//! | apply FILE / fleet of two / listing containers   | FAILS: the saved fleet plan is refused whole as "stale on faulty" (its listing failed); healthy untouched, its refusal filed under healthy | FAILS (same); ok since 55552a0 |
//! | apply FILE / one / an inspect fails              | ok                                                                                               | ok    |
//! | destroy ID / fleet of two / a removal fails      | ok                                                                                               | ok    |
//! | destroy ID / fleet of one / connection lost      | ok                                                                                               | ok    |
//! | destroy --prune / fleet of two / connection lost | ok                                                                                               | ok    |
//! | destroy --prune / one / deadline                 | ok                                                                                               | ok    |
//! | watch --once / one / unreachable                 | FAILS: exit 0, `converged: true`, no failure, human "Converged:"                                 | ok    |
//! | watch --once / fleet of two / listing volumes    | FAILS: exit 0, `converged: true` (the healthy part alone), no failure, human "Converged:"        | ok    |
//! | watch --once / fleet of one / verification       | ok                                                                                               | ok    |
//! | watch / one / listing networks fails             | FAILS: `cycleFailed` logged and /healthz 503, but the final report `converged: true`, no failure | ok    |
//! | watch / fleet of two / unreachable               | FAILS: final report `converged: true`, no failure; /healthz 200 while faulty fails every cycle   | ok    |
//!
//! In memory (only since the fix: it runs through `run::run_on`), at d440e7c
//! and 06abc77, 174 of 180 cells hold; since 55552a0, all 180:
//!
//! | command         | one engine | fleet of one | fleet of two |
//! |-----------------|------------|--------------|--------------|
//! | apply           | 10/10      | 10/10        | 10/10        |
//! | apply FILE      | 10/10      | 10/10        | 4/10: unreachable, the four listings and deadline FAIL (the saved fleet plan is refused whole; healthy untouched); 10/10 since 55552a0 |
//! | destroy ID      | 10/10      | 10/10        | 10/10        |
//! | destroy --prune | 10/10      | 10/10        | 10/10        |
//! | watch --once    | 10/10      | 10/10        | 10/10        |
//! | watch           | 10/10      | 10/10        | 10/10        |
//!
//! The lease commands, since they were added (all 48 hold):
//!
//! | command         | one engine | fleet of one | fleet of two |
//! |-----------------|------------|--------------|--------------|
//! | lease           | 6/6        | 6/6          | 6/6          |
//! | lease --release | 5/5        | 5/5          | 5/5          |
//! | hold            | 5/5        | 5/5          | 5/5          |
//!
//! The real lease cells, added on the code of 773970d (all 10 hold), and which of them
//! failed when the code was broken on purpose, one break at a time (each
//! reverted): B1 `exec::lease` drops a failed listing (`take` and
//! `release`); B2 `exec::lease::remove` counts a failed removal as
//! released; B3 `run` lets a hold whose release failed exit 0; B4 `hold`
//! runs its command when its lease could not be taken; B5 `take` drops a
//! failed create; B6 the box's leases listed without the box (no
//! `ca.sandbox.id` filter, any volume with a ttl label taken as its lease);
//! B7 `--engine` ignored (no narrowing, no one-engine check) and `lease`
//! taken on every engine of the run:
//!
//! | real lease cell: command / shape / fault       | now | failed under                                                                                                                     |
//! |------------------------------------------------|-----|----------------------------------------------------------------------------------------------------------------------------------|
//! | lease / one / creating a volume fails          | ok  | B5: exit 0, `ok: true`, no error                                                                                                 |
//! | lease / fleet of two / listing volumes fails   | ok  | B1: exit 0, `ok: true`, no error; B7: healthy called (a lease created there, its old lease removed)                             |
//! | lease / fleet of one / a removal fails         | ok  | B2: exit 0, the old lease claimed released but there; B6: another box's lease removed                                           |
//! | lease --release / fleet of two / unreachable   | ok  | B1: exit 0, `ok: true`, no error; B6: another box's lease removed on healthy                                                    |
//! | lease --release / fleet of two / removal fails | ok  | B2: exit 0, claimed released but there; B6                                                                                       |
//! | lease --release / one / listing volumes fails  | ok  | B1: exit 0, human "no lease to release" of the faulty engine                                                                    |
//! | lease --release / fleet of one / deadline      | ok  | B1                                                                                                                               |
//! | hold / one / a removal fails                   | ok  | B2: exit 0, no `releaseFailed`, its lease claimed released but there; B3: exit 0                                                |
//! | hold / fleet of two / connection lost          | ok  | B2; B3                                                                                                                           |
//! | hold / fleet of one / creating a volume fails  | ok  | B4: the command ran without a lease                                                                                              |
//!
//! In memory, B1 to B6 broke the matching cells too; under B7 all 48 held
//! (the in-memory run hands `run_on` the faulty engine alone, so `--engine`
//! is never resolved there): only the real cell caught it.
//!
//! The archive cells, since they were added: on the code of e79d455 all 12
//! `apply --archive` cells held and all 21 `restore` cells FAILED (no error
//! named the volume or the engine; removing the helper fails: exit 0, JSON
//! `ok: true`, "restored volume", the helper left unnamed). Since the fix
//! (restore's errors say "restore of volume V on engine E: ..."; a helper it
//! cannot remove fails the restore, named left behind; a volume it cannot
//! remove again is named left behind) all 33 hold:
//!
//! | command         | one engine | fleet of one | fleet of two |
//! |-----------------|------------|--------------|--------------|
//! | restore         | 7/7        | 7/7          | 7/7          |
//! | apply --archive | 4/4        | 4/4          | 4/4          |
//!
//! Which failed when the code was broken on purpose (one break at a time,
//! each reverted): A1 restore's failed upload ignored (`fill` drops the
//! upload's error): the upload, upload-cut and deadline cells, 9 of 21
//! (exit 0, `ok: true`, "restored volume", the volume there); A2 `apply`
//! removes a volume whose archive failed (`exec::apply`): all 12 `apply
//! --archive` cells (exit 0, `converged: true`, the volumes gone, no
//! `archiveFailed`); A3 restore never removes the volume it created and
//! could not fill: every cell past the volume's create, 15 of 21 (it held
//! the helper-removal cell until "left behind" had to follow the volume's
//! name in one clause of the error); A4 a failed archive's temporary files
//! kept (`Cleanup` removes nothing): the download and download-cut cells,
//! 6 of 12 (`.NAME.tar.zst.partial` left in `DIR`; the helper and no-image
//! cells write no file).
//!
//! The read-only cells, since they were added (with the one exit decision,
//! when plan, inventory, graph and explain went through the one merge): 69
//! of 81 held at first; `graph` and `explain` in a fleet said a failed
//! engine's error without naming the engine (explain: all 10 fleet cells;
//! graph: unreachable in both fleets, 2, measured with the fix reverted).
//! Since an engine's failure there reads `error: engine NAME: ...`, all 81
//! hold:
//!
//! | command   | one engine | fleet of one | fleet of two |
//! |-----------|------------|--------------|--------------|
//! | plan      | 7/7        | 7/7          | 7/7          |
//! | inventory | 6/6        | 6/6          | 6/6          |
//! | graph     | 7/7        | 7/7          | 7/7          |
//! | explain   | 7/7        | 7/7          | 7/7          |
//!
//! The running watch's exit is judged since a SIGTERM'd watch exits with
//! its last cycle's status (before, it exited 0 whatever it found): every
//! watch cell, in memory and real, exits 1.
//!
//! `prune` and `destroy nosuchbox`, since they were added (on the code of
//! 4894e68): in memory all 54 cells hold (33 and 21), on a swarm manager
//! all 21 (13 and 8), and the 4 real cells. Run first under all 11
//! converging faults, the 12 `destroy nosuchbox` cells whose fault is in a
//! call it never makes (an inspect, a removal, the connection lost at the
//! first removal, the unrelated inspection) broke only "the fault really
//! happened" and what follows from it (a report that converged): each
//! exited 1 on the unknown box alone; those faults are not its cells.
//! Through MCP (the `prune` tool now `prune`'s twin, `destroy --prune`
//! having none: the `destroy` tool never prunes) all 33 `prune` cells
//! held; 19 of the 21 `destroy nosuchbox` cells failed: the call's text
//! said "what is left and why is named above" and never named the box
//! (the 2 that held: unreachable on one engine and on a fleet of one, where
//! no engine was listed and the report names no unknown box). Since the
//! text names every unknown box and what to do (the inventory tool,
//! `missingOk: true`), all 21 hold.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::support::report::{Kind, Report};

// ----- the axes -------------------------------------------------------------------

/// A command that can converge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Command {
    Apply,
    /// `plan --out FILE` while the engine is healthy, then the fault, then `apply FILE`.
    ApplySaved,
    /// `destroy doomed`.
    DestroyId,
    DestroyPrune,
    /// `prune` (no terminal: it asks nothing).
    Prune,
    /// `destroy nosuchbox`: a box ID nothing carries, on any engine. It
    /// removes nothing, and is never a success (`missingOk` not given).
    DestroyUnknown,
    WatchOnce,
    /// A running `watch --metrics 127.0.0.1:0`, stopped after its first cycles.
    Watch,
    /// `lease doomed --ttl 10m` (with `--engine faulty` in a fleet of two:
    /// taking a lease needs exactly one engine).
    Lease,
    /// `lease --release doomed`, on every engine of the run.
    Release,
    /// `hold doomed --ttl 3s -- sh -c 'touch ran'` (with `--engine faulty`
    /// in a fleet of two).
    Hold,
    /// `restore ARCHIVE --volume doomed-data-restored` (with `--engine
    /// faulty` in a fleet): the archive made beforehand by `destroy doomed
    /// --archive` on an engine of its own. Judged by [`restore_verdict`].
    Restore,
    /// `apply --archive DIR`: every managed volume archived before its
    /// removal. Judged by [`verdict`] and the archive checks of the run.
    ApplyArchive,
    /// `plan`: read-only, judged by [`read_only_verdict`].
    Plan,
    /// `inventory`: read-only.
    Inventory,
    /// `graph` (DOT): read-only.
    Graph,
    /// `explain box:doomed`: read-only.
    Explain,
}

impl Command {
    pub const ALL: [Command; 17] = [
        Command::Apply,
        Command::ApplySaved,
        Command::DestroyId,
        Command::DestroyPrune,
        Command::Prune,
        Command::DestroyUnknown,
        Command::WatchOnce,
        Command::Watch,
        Command::Lease,
        Command::Release,
        Command::Hold,
        Command::Restore,
        Command::ApplyArchive,
        Command::Plan,
        Command::Inventory,
        Command::Graph,
        Command::Explain,
    ];

    /// The commands that converge (and end in a report).
    pub const CONVERGING: [Command; 8] = [
        Command::Apply,
        Command::ApplySaved,
        Command::DestroyId,
        Command::DestroyPrune,
        Command::Prune,
        Command::DestroyUnknown,
        Command::WatchOnce,
        Command::Watch,
    ];

    /// The commands that take or release leases.
    pub const LEASES: [Command; 3] = [Command::Lease, Command::Release, Command::Hold];

    /// The commands of `--archive` and `restore` (in memory only: no real cell).
    pub const ARCHIVE: [Command; 2] = [Command::Restore, Command::ApplyArchive];

    /// The read-only commands, which go through the same merge as `apply`
    /// (in memory only: no real cell).
    pub const READ_ONLY: [Command; 4] = [
        Command::Plan,
        Command::Inventory,
        Command::Graph,
        Command::Explain,
    ];

    /// True for `plan`, `inventory`, `graph` and `explain`: judged by
    /// [`read_only_verdict`].
    pub fn read_only(self) -> bool {
        matches!(
            self,
            Command::Plan | Command::Inventory | Command::Graph | Command::Explain
        )
    }

    /// True for `restore` and `apply --archive`.
    pub fn archive(self) -> bool {
        matches!(self, Command::Restore | Command::ApplyArchive)
    }

    /// True when the command runs on exactly one engine (`--engine faulty`
    /// in a fleet of two): `lease`, `hold`, `restore`.
    pub fn one_engine(self) -> bool {
        self.takes_a_lease() || self == Command::Restore
    }

    /// True for `lease`, `lease --release` and `hold`: judged by
    /// [`lease_verdict`].
    pub fn leases(self) -> bool {
        matches!(self, Command::Lease | Command::Release | Command::Hold)
    }

    /// True when the command takes a lease: it runs on exactly one engine.
    pub fn takes_a_lease(self) -> bool {
        matches!(self, Command::Lease | Command::Hold)
    }

    /// The faults of the calls the command makes: a cell with a fault in a
    /// call the command never makes could not fail, so there is none.
    /// Taking a lease creates a volume, lists the box's leases and removes
    /// the older one; releasing lists and removes; a hold creates, then
    /// (after its command) removes its own lease. `restore` creates the
    /// volume, a helper, uploads into it and removes the helper (each call
    /// goes through the same connection: unreachable; its upload past the
    /// deadline). `apply --archive` makes every call of `apply`, which its
    /// cells do not repeat, and the archive's: the helper, the download
    /// (failed, or cut mid-stream), and the image it needs present.
    /// `destroy nosuchbox` lists, plans nothing and verifies: no inspection,
    /// no removal.
    pub fn faults(self) -> &'static [Fault] {
        const CONVERGING: &[Fault] = &[
            Fault::Unreachable,
            Fault::ListContainers,
            Fault::ListVolumes,
            Fault::ListNetworks,
            Fault::ListImages,
            Fault::Inspect,
            Fault::Removal,
            Fault::VerifyListing,
            Fault::LostMidApply,
            Fault::Deadline,
            Fault::InspectHangs,
        ];
        // Discovery's calls: the listings (every container's past its
        // deadline too) and the inspection of an unmanaged container.
        const READ_ONLY: &[Fault] = &[
            Fault::Unreachable,
            Fault::ListContainers,
            Fault::ListVolumes,
            Fault::ListNetworks,
            Fault::ListImages,
            Fault::Deadline,
            Fault::InspectHangs,
        ];
        // What a converging run that removes nothing calls: the listings
        // (the container listing past its deadline too) and the
        // verification's. It inspects nothing: no container would go.
        const REMOVES_NOTHING: &[Fault] = &[
            Fault::Unreachable,
            Fault::ListContainers,
            Fault::ListVolumes,
            Fault::ListNetworks,
            Fault::ListImages,
            Fault::VerifyListing,
            Fault::Deadline,
        ];
        match self {
            Command::DestroyUnknown => REMOVES_NOTHING,
            Command::Lease => &[
                Fault::Unreachable,
                Fault::Create,
                Fault::ListVolumes,
                Fault::Removal,
                Fault::LostMidApply,
                Fault::Deadline,
            ],
            Command::Release => &[
                Fault::Unreachable,
                Fault::ListVolumes,
                Fault::Removal,
                Fault::LostMidApply,
                Fault::Deadline,
            ],
            Command::Hold => &[
                Fault::Unreachable,
                Fault::Create,
                Fault::Removal,
                Fault::LostMidApply,
                Fault::Deadline,
            ],
            Command::Restore => &[
                Fault::Unreachable,
                Fault::Create,
                Fault::CreateHelper,
                Fault::Upload,
                Fault::UploadCut,
                Fault::HelperRemoval,
                Fault::Deadline,
            ],
            Command::ApplyArchive => &[
                Fault::CreateHelper,
                Fault::Download,
                Fault::DownloadCut,
                Fault::DownloadThenShutdown,
                Fault::NoImage,
            ],
            Command::Plan | Command::Graph | Command::Explain => READ_ONLY,
            // The inventory inspects no container.
            Command::Inventory => &READ_ONLY[..READ_ONLY.len() - 1],
            _ => CONVERGING,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Command::Apply => "apply",
            Command::ApplySaved => "apply FILE",
            Command::DestroyId => "destroy ID",
            Command::DestroyPrune => "destroy --prune",
            Command::Prune => "prune",
            Command::DestroyUnknown => "destroy nosuchbox",
            Command::WatchOnce => "watch --once",
            Command::Watch => "watch",
            Command::Lease => "lease",
            Command::Release => "lease --release",
            Command::Hold => "hold",
            Command::Restore => "restore",
            Command::ApplyArchive => "apply --archive",
            Command::Plan => "plan",
            Command::Inventory => "inventory",
            Command::Graph => "graph",
            Command::Explain => "explain box:doomed",
        }
    }

    /// The subcommand and its arguments (`saved`: the plan file of `apply
    /// FILE`; `hold`'s command touches `ran` beside it).
    pub fn args(self, shape: Shape, saved: &str) -> Vec<String> {
        let one = if (self.takes_a_lease() && shape == Shape::FleetOfTwo)
            || (self == Command::Restore && shape != Shape::One)
        {
            vec!["--engine".to_string(), FAULTY.to_string()]
        } else {
            Vec::new()
        };
        let ran = std::path::Path::new(saved).with_file_name("ran");
        let touch = format!("touch '{}'", ran.display());
        let archive = std::path::Path::new(saved).with_file_name(ARCHIVE_FILE);
        let archive = archive.display().to_string();
        let dir = std::path::Path::new(saved).with_file_name(ARCHIVE_DIR);
        let dir = dir.display().to_string();
        let args: &[&str] = match self {
            Command::Restore => &["restore", &archive, "--volume", RESTORED],
            Command::ApplyArchive => &["apply", "--archive", &dir],
            Command::Lease => &["lease", BOX, "--ttl", "10m"],
            Command::Release => &["lease", "--release", BOX],
            Command::Hold => &["hold", BOX, "--ttl", "3s", "--", "sh", "-c", &touch],
            Command::Apply => &["apply"],
            Command::Plan => &["plan"],
            Command::Inventory => &["inventory"],
            Command::Graph => &["graph"],
            Command::Explain => &["explain", "box:doomed"],
            Command::ApplySaved => &["apply", saved],
            Command::DestroyId => &["destroy", BOX],
            Command::DestroyPrune => &["destroy", "--prune"],
            Command::Prune => &["prune"],
            Command::DestroyUnknown => &["destroy", UNKNOWN],
            Command::WatchOnce => &["--grace", "0s", "watch", "--once"],
            Command::Watch => &[
                "--grace",
                "0s",
                "watch",
                "--metrics",
                "127.0.0.1:0",
                "--debounce",
                "1s",
                "--resync",
                "60s",
            ],
        };
        one.into_iter()
            .chain(args.iter().map(|a| a.to_string()))
            .collect()
    }

    /// The MCP tool that is this command's twin, with its arguments (none
    /// for the commands an agent is not given: apply, a saved plan, watch,
    /// hold, restore, graph; and `destroy --prune`, whose twin is `prune`'s:
    /// the `destroy` tool refuses to prune).
    pub fn tool(self) -> Option<(&'static str, serde_json::Value)> {
        use serde_json::json;
        Some(match self {
            Command::DestroyId => ("destroy", json!({ "ids": [BOX] })),
            Command::DestroyUnknown => ("destroy", json!({ "ids": [UNKNOWN] })),
            Command::Prune => ("prune", json!({})),
            Command::Lease => ("lease", json!({ "ids": [BOX], "ttl": "10m" })),
            Command::Release => ("lease", json!({ "ids": [BOX], "release": true })),
            Command::Plan => ("plan", json!({})),
            Command::Inventory => ("inventory", json!({})),
            Command::Explain => ("explain", json!({ "object": "box:doomed" })),
            _ => return None,
        })
    }

    /// True when box `doomed` is to go (every converging command but
    /// `destroy nosuchbox`, which removes nothing).
    pub fn removes_box(self) -> bool {
        self != Command::DestroyUnknown
    }

    /// The faults of the Swarm calls the command makes on a swarm manager:
    /// both (listing the services, removing the box's), but for `destroy
    /// nosuchbox`, which removes nothing.
    pub fn swarm_faults(self) -> &'static [Fault] {
        if self.removes_box() {
            &Fault::SWARM
        } else {
            &Fault::SWARM[..1]
        }
    }

    /// True when the leaked volume is to go too (every converging command
    /// but `destroy ID`; the lease commands remove leases only).
    pub fn removes_leaks(self) -> bool {
        self != Command::DestroyId
            && self.removes_box()
            && !self.leases()
            && self != Command::Restore
            && !self.read_only()
    }
}

/// How many engines, and how the state file names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shape {
    /// No `[[engine]]`: the one engine is `default`.
    One,
    /// `[[engine]]` once: `faulty`.
    FleetOfOne,
    /// `faulty`, then `healthy` (in that order, so that the healthy engine's
    /// cycle is the last one a watch runs).
    FleetOfTwo,
    /// No `[[engine]]`: the one engine is `default`, reached as
    /// `ssh://root@127.0.0.1:PORT` through an sshd of the test's own (the
    /// faulty engine behind it, as the remote's `DOCKER_HOST`). Real cells
    /// only: in memory it is [`Shape::One`] (the transport is what differs).
    SshPort,
    /// One engine (no `[[engine]]`) that is a swarm manager: box `doomed`
    /// also runs as a Swarm service (a task container on the box's network,
    /// a config and a secret). In memory only (a swarm is never made on the
    /// main engine, which the real cells use); not in [`Shape::ALL`]: its
    /// cells are [`Cell::swarm`], with the faults of the Swarm calls too.
    SwarmManager,
}

impl Shape {
    pub const ALL: [Shape; 3] = [Shape::One, Shape::FleetOfOne, Shape::FleetOfTwo];
    /// Shapes with real cells only (see [`Shape::SshPort`]).
    pub const REAL_ONLY: [Shape; 1] = [Shape::SshPort];

    /// The in-memory shape whose cells this shape's real cells stand for.
    pub fn in_memory(self) -> Shape {
        match self {
            Shape::SshPort => Shape::One,
            other => other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Shape::One => "one engine",
            Shape::FleetOfOne => "fleet of one",
            Shape::FleetOfTwo => "fleet of two",
            Shape::SshPort => "one engine over ssh://user@host:PORT",
            Shape::SwarmManager => "swarm manager",
        }
    }

    /// The faulty engine's name in reports.
    pub fn faulty(self) -> &'static str {
        match self {
            Shape::One | Shape::SshPort | Shape::SwarmManager => "default",
            Shape::FleetOfOne | Shape::FleetOfTwo => FAULTY,
        }
    }

    /// The healthy engine's name, in a fleet of two.
    pub fn healthy(self) -> Option<&'static str> {
        (self == Shape::FleetOfTwo).then_some(HEALTHY)
    }
}

/// What goes wrong on the faulty engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    Unreachable,
    ListContainers,
    ListVolumes,
    ListNetworks,
    ListImages,
    /// The re-check of the box's volume right before its removal.
    Inspect,
    /// The box's container (the lease commands: a lease volume).
    Removal,
    /// The container listing after apply.
    VerifyListing,
    /// The connection is lost at the first removal: that call and every later one fail.
    LostMidApply,
    /// The container listing passes its deadline (the lease commands: their
    /// first call, the create of `lease` and `hold`, the listing of `lease --release`).
    Deadline,
    /// The inspection of an unrelated (unlabeled) container made after the
    /// box's hangs past its deadline (a `docker cp` holds its lock): the
    /// box's container, which it could have joined, is blocked
    /// (`holderUnknown`) and what it uses waits for it; the rest goes.
    InspectHangs,
    /// Creating a volume (a lease; `restore`'s volume) fails.
    Create,
    /// Creating the helper container fails (the engine refuses it).
    CreateHelper,
    /// `restore`'s upload into the helper fails.
    Upload,
    /// `restore`'s upload is cut mid-stream (part of the tar is in the volume).
    UploadCut,
    /// Removing `restore`'s helper container fails.
    HelperRemoval,
    /// `--archive`'s download from the helper fails.
    Download,
    /// `--archive`'s download is cut mid-stream.
    DownloadCut,
    /// `--archive`'s download ends well, but the engine then answers no new
    /// connection (a dockerd shutting down, which leaves out of the stream
    /// what it unmounts meanwhile).
    DownloadThenShutdown,
    /// No `ca-sbx:*` image is present (none is pulled): no helper can be made.
    NoImage,
    /// Listing the Swarm services fails (a swarm manager's, with a 500).
    ListServices,
    /// Removing the box's Swarm service fails.
    ServiceRemoval,
}

impl Fault {
    /// True when the fault leaves the engine answering with discovery
    /// incomplete (a listing or an inspection failed or hung): a running
    /// watch is then degraded, not dead (`/healthz` 200, "degraded: ...").
    pub fn degrades(self) -> bool {
        matches!(
            self,
            Fault::ListContainers
                | Fault::ListVolumes
                | Fault::ListNetworks
                | Fault::ListImages
                | Fault::VerifyListing
                | Fault::Deadline
                | Fault::InspectHangs
                | Fault::ListServices
        )
    }

    /// The faults of the calls only a swarm manager's world makes.
    pub const SWARM: [Fault; 2] = [Fault::ListServices, Fault::ServiceRemoval];

    pub const ALL: [Fault; 22] = [
        Fault::Unreachable,
        Fault::ListContainers,
        Fault::ListVolumes,
        Fault::ListNetworks,
        Fault::ListImages,
        Fault::Inspect,
        Fault::Removal,
        Fault::VerifyListing,
        Fault::LostMidApply,
        Fault::Deadline,
        Fault::InspectHangs,
        Fault::Create,
        Fault::CreateHelper,
        Fault::Upload,
        Fault::UploadCut,
        Fault::HelperRemoval,
        Fault::Download,
        Fault::DownloadCut,
        Fault::DownloadThenShutdown,
        Fault::NoImage,
        Fault::ListServices,
        Fault::ServiceRemoval,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Unreachable => "unreachable",
            Fault::ListContainers => "listing containers fails",
            Fault::ListVolumes => "listing volumes fails",
            Fault::ListNetworks => "listing networks fails",
            Fault::ListImages => "listing images fails",
            Fault::Inspect => "an inspect fails",
            Fault::Removal => "a removal fails",
            Fault::VerifyListing => "the verification listing fails",
            Fault::LostMidApply => "connection lost mid-apply",
            Fault::Deadline => "a call passes its deadline",
            Fault::InspectHangs => "an unrelated container's inspect hangs",
            Fault::Create => "creating a volume fails",
            Fault::CreateHelper => "creating the helper fails",
            Fault::Upload => "the upload fails",
            Fault::UploadCut => "the upload is cut mid-stream",
            Fault::HelperRemoval => "removing the helper fails",
            Fault::Download => "the download fails",
            Fault::DownloadCut => "the download is cut mid-stream",
            Fault::DownloadThenShutdown => {
                "the engine answers no new connection after the download"
            }
            Fault::NoImage => "no retained image",
            Fault::ListServices => "listing services fails",
            Fault::ServiceRemoval => "a service removal fails",
        }
    }
}

/// One cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cell {
    pub command: Command,
    pub shape: Shape,
    pub fault: Fault,
}

impl Cell {
    pub const fn new(command: Command, shape: Shape, fault: Fault) -> Cell {
        Cell {
            command,
            shape,
            fault,
        }
    }

    /// The swarm manager's cells of a converging command: its faults and
    /// the faults of the Swarm calls it makes.
    pub fn swarm(command: Command) -> Vec<Cell> {
        command
            .faults()
            .iter()
            .chain(command.swarm_faults())
            .map(|&fault| Cell::new(command, Shape::SwarmManager, fault))
            .collect()
    }

    /// Every cell: commands × shapes × the faults of each command's calls.
    pub fn all() -> Vec<Cell> {
        let mut all = Vec::new();
        for command in Command::ALL {
            for shape in Shape::ALL {
                for &fault in command.faults() {
                    all.push(Cell::new(command, shape, fault));
                }
            }
        }
        all
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} / {} / {}",
            self.command.name(),
            self.shape.name(),
            self.fault.name()
        )
    }
}

/// The box every world has, and the one `destroy ID` names.
pub const BOX: &str = "doomed";
/// The box `destroy nosuchbox` names: no world has it.
pub const UNKNOWN: &str = "nosuchbox";
/// The faulty engine's name in a fleet.
pub const FAULTY: &str = "faulty";
/// The healthy engine's name in a fleet of two.
pub const HEALTHY: &str = "healthy";
/// The volume `restore` makes (`--volume`): none of the world's.
pub const RESTORED: &str = "doomed-data-restored";
/// `restore`'s archive (its manifest beside it), in the cell's folder.
pub const ARCHIVE_FILE: &str = "doomed-data.tar.zst";
/// `apply --archive`'s folder, in the cell's folder.
pub const ARCHIVE_DIR: &str = "archives";

// ----- what every cell must show ---------------------------------------------------

/// What the healthy engine's part must have removed, by kind (names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removals {
    pub containers: BTreeSet<String>,
    pub volumes: BTreeSet<String>,
    pub networks: BTreeSet<String>,
    pub swarm: BTreeSet<String>,
}

impl Removals {
    fn of(&self, kind: Kind) -> &BTreeSet<String> {
        match kind {
            Kind::Container => &self.containers,
            Kind::Volume => &self.volumes,
            Kind::Network => &self.networks,
            Kind::Service | Kind::Config | Kind::Secret => &self.swarm,
        }
    }
}

/// What a running watch showed before it was stopped.
#[derive(Debug, Clone, Default)]
pub struct WatchSeen {
    /// The JSON log lines, in order.
    pub log: Vec<serde_json::Value>,
    /// The status of `GET /healthz` after the first cycle of every engine.
    pub healthz: Option<u16>,
}

/// What a cell's runs produced.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The exit code of the JSON run.
    pub exit: Option<i32>,
    /// Its report (stdout).
    pub report: Result<Report, String>,
    /// Stdout of the same cell run with `--format human` (none for a running watch).
    pub human: Option<String>,
    /// A running watch's log and health.
    pub watch: Option<WatchSeen>,
    /// A lease command's runs (they print no report).
    pub lease: Option<LeaseSeen>,
    /// `restore`'s runs (it prints no report).
    pub restore: Option<RestoreSeen>,
    /// A read-only command's runs (they print no report).
    pub read_only: Option<ReadOnlySeen>,
    /// Both streams of every run, for messages.
    pub dump: String,
}

/// One run of a lease command, and what the engines held after it.
#[derive(Debug, Clone, Default)]
pub struct LeaseRunSeen {
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The volumes each engine holds after the run, by engine name.
    pub volumes: BTreeMap<String, BTreeSet<String>>,
    /// `hold`: whether its command ran.
    pub ran: bool,
    /// The box's old lease on every engine of the world ([`OLD_LEASE`] in
    /// memory; on real engines a name of the run's own scope).
    pub old_lease: String,
}

/// What a lease command's two runs showed: `--format json` and `--format human`.
#[derive(Debug, Clone, Default)]
pub struct LeaseSeen {
    pub json: LeaseRunSeen,
    pub human: LeaseRunSeen,
    /// Through the MCP surface: one tool call, judged as the JSON run
    /// (`human` is a copy of it, not judged).
    pub mcp: bool,
}

/// The lease volume a lease command's world holds for the box before the run
/// (`lease` replaces it, `lease --release` removes it, `hold` leaves it).
pub const OLD_LEASE: &str = "ca-sbx-lease-doomed-old";

/// Every way a lease command's runs break the cell's promises. Both runs:
/// exit 1; an `error:` line naming the box and the faulty engine, none
/// naming the healthy one. What is claimed is true: a lease said to hold
/// exists on its engine, a lease said released is gone from it, "no lease
/// to release" is never said of the faulty engine. `lease`/`--release` in
/// JSON: `ok: false`, every error filed under the faulty engine, the healthy
/// engine's part released its lease. `hold`: a `notLeased` or
/// `releaseFailed` line of the faulty engine naming the box; the command
/// did not run when no lease was taken, and did when only the release
/// failed, whose lease is named, still there, with when it runs out.
pub fn lease_verdict(cell: Cell, seen: &LeaseSeen) -> Vec<String> {
    let faulty = cell.shape.faulty();
    let who = format!("box {BOX} on engine {faulty}");
    let mut problems = Vec::new();
    let taken = !matches!(
        cell.fault,
        Fault::Unreachable | Fault::Create | Fault::Deadline
    );
    let formats = if cell.command == Command::Graph {
        ["dot", "mermaid"]
    } else {
        ["json", "human"]
    };
    let runs = if seen.mcp { 1 } else { 2 };
    for (format, run) in formats
        .into_iter()
        .zip([&seen.json, &seen.human])
        .take(runs)
    {
        let mut problem = |p: String| problems.push(format!("{format} run: {p}"));
        if run.exit != Some(1) {
            problem(format!("exit {:?}, not 1", run.exit));
        }
        // (hold's JSON lines are judged below.)
        let hold_json = cell.command == Command::Hold && format == "json";
        if !hold_json
            && !run
                .stderr
                .lines()
                .any(|l| l.contains("error") && l.contains(&who))
        {
            problem(format!("no error on stderr names {who}"));
        }
        if let Some(healthy) = cell.shape.healthy() {
            for l in run.stderr.lines().filter(|l| l.contains("error")) {
                if l.contains(&format!("engine {healthy}"))
                    || l.contains(&format!("\"engine\":\"{healthy}\""))
                {
                    problem(format!("an error is filed under {healthy}: {l}"));
                }
            }
        }
        let holds = |engine: &str, volume: &str| {
            run.volumes.get(engine).is_some_and(|v| v.contains(volume))
        };
        if let Some(healthy) = cell
            .shape
            .healthy()
            .filter(|_| cell.command == Command::Release)
        {
            if holds(healthy, &run.old_lease) {
                problem(format!("{healthy} still holds {}", run.old_lease));
            }
        }
        if cell.command == Command::Hold {
            if run.ran != taken {
                problem(format!(
                    "the command {} although the lease {}",
                    if run.ran { "ran" } else { "did not run" },
                    if taken { "was taken" } else { "was not" }
                ));
            }
            if format == "json" {
                let lines =
                    crate::support::schema::check_lines("hold-line", &run.stderr, "hold's stderr");
                let failed: Vec<&serde_json::Value> = lines
                    .iter()
                    .filter(|l| l["event"] == "notLeased" || l["event"] == "releaseFailed")
                    .collect();
                if !failed
                    .iter()
                    .any(|l| l["engine"] == faulty && l["box"] == BOX)
                {
                    problem(format!("no notLeased or releaseFailed line of {who}"));
                }
                for l in lines.iter().filter(|l| l["event"] == "releaseFailed") {
                    let volume = l["lease"]["volume"].as_str().unwrap_or_default();
                    if !holds(faulty, volume) || l["lease"]["until"].as_str().is_none() {
                        problem(format!(
                            "releaseFailed names no lease still there, with its end: {l}"
                        ));
                    }
                }
                for l in lines.iter().filter(|l| l["event"] == "released") {
                    for v in l["volumes"].as_array().into_iter().flatten() {
                        if holds(faulty, v.as_str().unwrap_or_default()) {
                            problem(format!("claims {v} released, but it is there"));
                        }
                    }
                }
            } else {
                for l in run.stderr.lines() {
                    if let Some((_, names)) = l.split_once(&format!("of {who}: ")) {
                        if l.contains(" released ") && !l.contains("error") {
                            for v in names.split(", ") {
                                if holds(faulty, v) {
                                    problem(format!("claims {v} released, but it is there"));
                                }
                            }
                        }
                    }
                }
            }
            continue;
        }
        // lease, lease --release
        if format == "json" {
            let doc: serde_json::Value = match serde_json::from_str(&run.stdout) {
                Ok(doc) => doc,
                Err(e) => {
                    problem(format!("no JSON document: {e}"));
                    continue;
                }
            };
            if doc["ok"] != false {
                problem("the document says ok".into());
            }
            let boxes = doc["boxes"].as_array().cloned().unwrap_or_default();
            if !boxes.iter().any(|b| {
                b["engine"] == faulty
                    && b["box"] == BOX
                    && b["errors"].as_array().is_some_and(|e| !e.is_empty())
            }) {
                problem(format!("no error filed under {who}"));
            }
            for b in &boxes {
                let engine = b["engine"].as_str().unwrap_or_default();
                let failed = b["errors"].as_array().is_some_and(|e| !e.is_empty());
                if failed && engine != faulty {
                    problem(format!("errors filed under engine {engine}: {b}"));
                }
                if let Some(volume) = b["lease"]["volume"].as_str() {
                    if !holds(engine, volume) {
                        problem(format!(
                            "claims lease {volume} on {engine}, which is not there"
                        ));
                    }
                }
                for v in b["released"].as_array().into_iter().flatten() {
                    if holds(engine, v.as_str().unwrap_or_default()) {
                        problem(format!("claims {v} released on {engine}, but it is there"));
                    }
                }
            }
            if let Some(healthy) = cell
                .shape
                .healthy()
                .filter(|_| cell.command == Command::Release)
            {
                let old = &run.old_lease;
                let part = boxes.iter().find(|b| b["engine"] == healthy);
                let released = part.map(|b| b["released"].clone());
                if released != Some(serde_json::json!([old])) || holds(healthy, old) {
                    problem(format!("{healthy}'s part did not release {old}: {part:?}"));
                }
            }
        } else {
            for l in run.stdout.lines() {
                let engine = l
                    .strip_prefix(&format!("box {BOX} on engine "))
                    .and_then(|rest| rest.split_once(':'))
                    .map(|(e, _)| e.to_string());
                if let (Some(engine), Some((_, rest))) = (&engine, l.split_once(": lease ")) {
                    let volume = rest.split(' ').next().unwrap_or_default();
                    if !holds(engine, volume) {
                        problem(format!(
                            "claims lease {volume} on {engine}, which is not there: {l}"
                        ));
                    }
                }
                if let (Some(engine), Some((_, names))) = (
                    &engine,
                    l.split_once(" leases: ")
                        .or_else(|| l.split_once(" lease: ")),
                ) {
                    for v in names.split(", ") {
                        if holds(engine, v) {
                            problem(format!(
                                "claims {v} released on {engine}, but it is there: {l}"
                            ));
                        }
                    }
                }
                if let Some(v) = l.trim().strip_prefix("released an older lease: ") {
                    if holds(faulty, v) {
                        problem(format!("claims {v} released, but it is there"));
                    }
                }
                if engine.as_deref() == Some(faulty) && l.contains("no lease to release") {
                    problem(format!("says of {faulty}: {l}"));
                }
            }
        }
    }
    problems
}

/// One run of `restore`, and what the engines held after it.
#[derive(Debug, Clone, Default)]
pub struct RestoreRunSeen {
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The faulty engine's volumes and containers (names) before and after.
    pub volumes_before: BTreeSet<String>,
    pub volumes: BTreeSet<String>,
    pub containers_before: BTreeSet<String>,
    pub containers: BTreeSet<String>,
    /// The faulty engine's removals (`Remove(Kind) target`) and the
    /// helpers it made (IDs).
    pub removals: Vec<String>,
    pub helpers: BTreeSet<String>,
    /// The healthy engine's calls (a fleet of two; `--engine faulty`: none).
    pub healthy_calls: Vec<String>,
}

/// `restore`'s two runs: `--format json` and `--format human`.
#[derive(Debug, Clone, Default)]
pub struct RestoreSeen {
    pub json: RestoreRunSeen,
    pub human: RestoreRunSeen,
}

/// Every way `restore`'s runs break the cell's promises. Both runs: exit 1;
/// an `error:` line naming the volume and the faulty engine; no "restored"
/// claim (JSON: `ok: false`, no `restored`, its `error` naming the volume
/// and the engine). Nothing touched but what restore made: no volume
/// created but [`RESTORED`], and that one gone again unless an error line
/// names it left behind (in one clause: "volume NAME ... left behind"); no
/// helper left unless an error line names it so ("helper container ID ...
/// left behind"); no removal but of that volume and the helpers it made; every
/// volume and container of the world still there; no call on the healthy
/// engine (`--engine faulty`).
pub fn restore_verdict(cell: Cell, seen: &RestoreSeen) -> Vec<String> {
    let faulty = cell.shape.faulty();
    let engine = format!("engine {faulty}");
    let mut problems = Vec::new();
    let formats = if cell.command == Command::Graph {
        ["dot", "mermaid"]
    } else {
        ["json", "human"]
    };
    for (format, run) in formats.into_iter().zip([&seen.json, &seen.human]) {
        let mut p = |m: String| problems.push(format!("{format} run: {m}"));
        if run.exit != Some(1) {
            p(format!("exit {:?}, not 1", run.exit));
        }
        let errors: Vec<&str> = run
            .stderr
            .lines()
            .filter(|l| l.starts_with("error:"))
            .collect();
        if !errors
            .iter()
            .any(|l| l.contains(RESTORED) && l.contains(&engine))
        {
            p(format!(
                "no error line names volume {RESTORED} and {engine}: {errors:?}"
            ));
        }
        if run.stdout.contains("restored volume") || run.stderr.contains("restored volume") {
            p("claims the volume restored".into());
        }
        if format == "json" {
            match serde_json::from_str::<serde_json::Value>(&run.stdout) {
                Err(e) => p(format!("no JSON document: {e}")),
                Ok(doc) => {
                    if doc["ok"] != false {
                        p(format!("JSON ok is {}, not false", doc["ok"]));
                    }
                    if !doc["restored"].is_null() {
                        p(format!("JSON claims restored: {}", doc["restored"]));
                    }
                    let error = doc["error"].as_str().unwrap_or_default();
                    if !(error.contains(RESTORED) && error.contains(&engine)) {
                        p(format!(
                            "the JSON error does not name volume {RESTORED} and {engine}: {error:?}"
                        ));
                    }
                }
            }
        }
        // An error line names `what` left behind: "left behind" follows
        // it in the same clause (up to the next `;` or `:`).
        let left_behind = |what: &str| {
            errors.iter().any(|l| {
                l.split(what).skip(1).any(|after| {
                    after
                        .split([';', ':'])
                        .next()
                        .unwrap_or("")
                        .contains("left behind")
                })
            })
        };
        if run.volumes.contains(RESTORED) && !left_behind(&format!("volume {RESTORED}")) {
            p(format!(
                "volume {RESTORED} is there, not named as left behind: {errors:?}"
            ));
        }
        for v in run.volumes.difference(&run.volumes_before) {
            if v != RESTORED {
                p(format!("created volume {v}"));
            }
        }
        for v in run.volumes_before.difference(&run.volumes) {
            p(format!("volume {v} is gone"));
        }
        for c in run.containers_before.difference(&run.containers) {
            p(format!("container {c} is gone"));
        }
        for h in run.containers.difference(&run.containers_before) {
            if !left_behind("helper container ") {
                p(format!(
                    "container {h} (a helper) is left, not named as left behind: {errors:?}"
                ));
            }
        }
        for r in &run.removals {
            let made = r == &format!("Remove(Volume) {RESTORED}")
                || r.strip_prefix("Remove(Container) ")
                    .is_some_and(|id| run.helpers.contains(id));
            if !made {
                p(format!("{r} is out of bounds"));
            }
        }
        if !run.healthy_calls.is_empty() {
            p(format!("{HEALTHY} was called: {:?}", run.healthy_calls));
        }
    }
    problems
}

/// One run of a read-only command, and what the engines were asked.
#[derive(Debug, Clone, Default)]
pub struct ReadOnlyRunSeen {
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// What a read-only command's two runs showed (`--format json`, `--format
/// human`; `graph`: `dot`, `mermaid`), and what the engines say was touched
/// (empty: nothing).
#[derive(Debug, Clone, Default)]
pub struct ReadOnlySeen {
    pub json: ReadOnlyRunSeen,
    pub human: ReadOnlyRunSeen,
    pub touched: Vec<String>,
    /// Through the MCP surface: one tool call, judged as the JSON run
    /// (`human` is a copy of it, not judged).
    pub mcp: bool,
}

/// Every way a read-only command's runs break the cell's promises. Both
/// runs: exit 1 (one engine down, or its discovery incomplete, fails the
/// run: the same merge as `apply`); the faulty engine named in an `error:`,
/// `warning:` or `FAILED` line (a fleet), the healthy one in none; nothing
/// created or removed. In a fleet of two the healthy engine's part is still
/// shown: in the JSON run an object of engine `healthy` that is no error,
/// in the human run its heading or (`explain`) its name; `graph`, whose DOT
/// and Mermaid name no engine: a graph drawn.
pub fn read_only_verdict(cell: Cell, seen: &ReadOnlySeen) -> Vec<String> {
    let mut problems = Vec::new();
    let faulty = cell.shape.faulty();
    let formats = if cell.command == Command::Graph {
        ["dot", "mermaid"]
    } else {
        ["json", "human"]
    };
    let runs = if seen.mcp { 1 } else { 2 };
    for (format, run) in formats
        .into_iter()
        .zip([&seen.json, &seen.human])
        .take(runs)
    {
        let mut p = |m: String| problems.push(format!("{format} run: {m}"));
        if run.exit != Some(1) {
            p(format!("exit {:?}, not 1", run.exit));
        }
        let all = format!("{}{}", run.stdout, run.stderr);
        // An `error:` or `warning:` line naming it, a `FAILED` line under
        // its `Engine NAME:` heading, or a JSON part of its name with an error.
        let said = |name: &str| {
            let mut under = false;
            all.lines().any(|l| {
                if !l.starts_with(char::is_whitespace) && !l.is_empty() {
                    under = l.starts_with(&format!("Engine {name}:"));
                }
                let t = l.trim_start();
                ((t.starts_with("error:") || t.starts_with("warning:") || t.contains("FAILED"))
                    && t.contains(name))
                    || (under && t.contains("FAILED"))
            }) || all.contains(&format!("\"engine\": \"{name}\",\n      \"error\""))
        };
        if cell.shape != Shape::One && !said(faulty) {
            p(format!("no error or warning names engine {faulty}"));
        }
        if let Some(healthy) = cell.shape.healthy() {
            for l in all.lines() {
                let t = l.trim_start();
                if (t.starts_with("error:") || t.starts_with("warning:")) && t.contains(healthy) {
                    p(format!("a line blames {healthy}: {l:?}"));
                }
            }
            let shown = if cell.command == Command::Graph {
                run.stdout.contains("digraph plan") || run.stdout.contains("flowchart")
            } else if format == "json" {
                json_docs(&run.stdout)
                    .iter()
                    .any(|d| engine_part_shown(d, healthy))
            } else {
                run.stdout.contains(&format!("Engine {healthy}:"))
                    || (cell.command == Command::Explain && run.stdout.contains(healthy))
            };
            if !shown {
                p(format!("the part of {healthy} is not shown"));
            }
        }
    }
    for t in &seen.touched {
        problems.push(format!("touched: {t}"));
    }
    problems
}

/// Every JSON document in `text`, one after the other.
fn json_docs(text: &str) -> Vec<serde_json::Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<serde_json::Value>()
        .map_while(Result::ok)
        .collect()
}

/// True when `doc` holds an object of engine `engine` that is not an error.
fn engine_part_shown(doc: &serde_json::Value, engine: &str) -> bool {
    match doc {
        serde_json::Value::Object(map) => {
            (map.get("engine").and_then(|e| e.as_str()) == Some(engine)
                && !map.contains_key("error"))
                || map.values().any(|v| engine_part_shown(v, engine))
        }
        serde_json::Value::Array(list) => list.iter().any(|v| engine_part_shown(v, engine)),
        _ => false,
    }
}

/// Every way `seen` breaks the cell's promises, as lines (empty: the cell holds).
/// `healthy`: what the healthy engine's part must have removed (fleet of two).
pub fn verdict(cell: Cell, seen: &Seen, healthy: Option<&Removals>) -> Vec<String> {
    if let Some(lease) = &seen.lease {
        return lease_verdict(cell, lease);
    }
    if let Some(restore) = &seen.restore {
        return restore_verdict(cell, restore);
    }
    if let Some(read_only) = &seen.read_only {
        return read_only_verdict(cell, read_only);
    }

    let mut problems = Vec::new();
    let faulty = cell.shape.faulty();
    // A running watch too: stopped (as by SIGTERM), it exits with its last
    // cycle's status, which the faulty engine failed.
    if seen.exit != Some(1) {
        problems.push(format!("exit {:?}, not 1", seen.exit));
    }
    match &seen.report {
        Err(e) => problems.push(format!("no JSON report: {e}")),
        Ok(report) => {
            report_verdict(cell, report, healthy, &mut problems);
            unknown_verdict(cell, report, seen.human.as_deref(), &mut problems);
        }
    }
    if let Some(human) = &seen.human {
        for line in converged_claims(human, cell.shape.healthy()) {
            problems.push(format!("human output claims convergence: {line:?}"));
        }
    }
    if let Some(watch) = &seen.watch {
        let expected = if cell.fault.degrades() { 200 } else { 503 };
        if watch.healthz != Some(expected) {
            problems.push(format!(
                "/healthz answered {:?}, not {expected}",
                watch.healthz
            ));
        }
        let mine = |l: &&serde_json::Value| l["engine"] == faulty;
        let failed = watch.log.iter().filter(mine).any(|l| {
            l["event"] == "cycleFailed" || (l["event"] == "cycle" && l["converged"] == false)
        });
        if !failed {
            problems.push(format!(
                "no failed cycle of engine {faulty} in the watch log"
            ));
        }
        for l in watch.log.iter().filter(mine) {
            if l["event"] == "cycle" && l["converged"] == true {
                problems.push(format!("the watch log claims {faulty} converged: {l}"));
            }
        }
        if let Some(name) = cell.shape.healthy() {
            let converged = watch
                .log
                .iter()
                .any(|l| l["engine"] == name && l["event"] == "cycle" && l["converged"] == true);
            if !converged {
                problems.push(format!(
                    "no converged cycle of engine {name} in the watch log"
                ));
            }
        }
    }
    problems
}

fn report_verdict(
    cell: Cell,
    report: &Report,
    healthy: Option<&Removals>,
    problems: &mut Vec<String>,
) {
    let faulty = cell.shape.faulty();
    if report.converged {
        problems.push("report says converged: true".into());
    }
    if report.failures.is_empty() {
        problems.push("report names no failure".into());
    }
    for f in &report.failures {
        if f.engine != faulty {
            problems.push(format!(
                "failure named with engine {:?}, not {faulty:?}: {:?} {}: {}",
                f.engine, f.kind, f.name, f.error
            ));
        }
        if f.error.trim().is_empty() {
            problems.push(format!("failure of {} says nothing", f.name));
        }
    }
    for l in report.all_remaining() {
        if l.engine != faulty {
            problems.push(format!(
                "leftover {} named with engine {:?}, not {faulty:?}",
                l.name, l.engine
            ));
        }
    }
    if let Some(summaries) = &report.engines {
        for s in summaries {
            if s.engine == faulty && s.converged {
                problems.push(format!("engines: {faulty} says converged"));
            }
        }
    }
    let (Some(name), Some(expected)) = (cell.shape.healthy(), healthy) else {
        return;
    };
    for kind in Kind::ALL {
        let removed: BTreeSet<String> = report
            .removed
            .of(kind)
            .iter()
            .filter(|g| g.engine == name)
            .map(|g| g.name.clone())
            .collect();
        if &removed != expected.of(kind) {
            problems.push(format!(
                "{name} removed {kind}s {removed:?}, expected {:?}",
                expected.of(kind)
            ));
        }
    }
    if let Some(summaries) = &report.engines {
        match summaries.iter().find(|s| s.engine == name) {
            Some(s) if s.converged && s.failures == 0 && s.remaining == 0 => {}
            Some(s) => problems.push(format!("engines: {name}'s part did not converge: {s:?}")),
            None => problems.push(format!("engines: no summary for {name}")),
        }
    }
}

/// The named box nothing carries (`destroy nosuchbox`): every box the
/// report names unknown is it, never excused (no `--missing-ok`, no audit
/// log); in a fleet of two it is named (the healthy engine was listed
/// whole, and does not carry it); where the report names it, so do the
/// human words. Any other command names no unknown box.
fn unknown_verdict(cell: Cell, report: &Report, human: Option<&str>, problems: &mut Vec<String>) {
    use crate::support::report::Unmatched;
    if cell.command != Command::DestroyUnknown {
        if !report.unknown_boxes.is_empty() {
            problems.push(format!("unknown boxes named: {:?}", report.unknown_boxes));
        }
        return;
    }
    for u in &report.unknown_boxes {
        if u.id != UNKNOWN || u.status != Unmatched::NotFound {
            problems.push(format!("unknown box {u:?}, not {UNKNOWN} notFound"));
        }
    }
    let named = report.unknown_boxes.iter().any(|u| u.id == UNKNOWN);
    if cell.shape.healthy().is_some() && !named {
        problems.push(format!(
            "{UNKNOWN} is not in unknownBoxes, though {HEALTHY} was listed whole"
        ));
    }
    let said = format!("box {UNKNOWN}: NOT FOUND");
    if let Some(human) = human.filter(|h| named && !h.contains(&said)) {
        problems.push(format!(
            "the report names {UNKNOWN} unknown, the words do not ({said:?}): {human:?}"
        ));
    }
}

/// Lines of human output that claim convergence outside the healthy engine's
/// own part. A fleet's report puts each engine's part, indented, under an
/// unindented `Engine NAME:` heading; any other unindented line is the run's own.
pub fn converged_claims(human: &str, healthy: Option<&str>) -> Vec<String> {
    let mut section: Option<String> = None;
    let mut claims = Vec::new();
    for line in human.lines() {
        if !line.starts_with(char::is_whitespace) && !line.is_empty() {
            section = line
                .strip_prefix("Engine ")
                .and_then(|rest| rest.split_once(':'))
                .map(|(name, _)| name.to_string());
        }
        let claim = line.contains("Converged");
        let in_healthy = healthy.is_some() && section.as_deref() == healthy;
        let indented = line.starts_with(char::is_whitespace);
        if claim && !(in_healthy && indented) {
            claims.push(line.to_string());
        }
    }
    claims
}

/// Fails the test naming the cell and every problem, with the runs' output.
#[track_caller]
pub fn assert_cell(cell: Cell, seen: &Seen, problems: &[String]) {
    assert!(
        problems.is_empty(),
        "cell {cell} fails:\n  - {}\n{}",
        problems.join("\n  - "),
        seen.dump
    );
}

// ----- the real-engine slice -------------------------------------------------------

macro_rules! real_slice {
    ($($test:ident: $command:ident / $shape:ident / $fault:ident;)*) => {
        /// The cells run against the real engine, one test each.
        pub const REAL_SLICE: &[Cell] = &[$(Cell::new(Command::$command, Shape::$shape, Fault::$fault)),*];
        $(
            trial!($test);
            async fn $test() {
                real::run(Cell::new(Command::$command, Shape::$shape, Fault::$fault)).await;
            }
        )*
    };
}

real_slice! {
    real_apply_one_removal: Apply / One / Removal;
    real_apply_fleet2_unreachable: Apply / FleetOfTwo / Unreachable;
    real_apply_fleet1_list_images: Apply / FleetOfOne / ListImages;
    real_apply_fleet2_verify_listing: Apply / FleetOfTwo / VerifyListing;
    real_apply_saved_fleet2_list_containers: ApplySaved / FleetOfTwo / ListContainers;
    real_apply_saved_one_inspect: ApplySaved / One / Inspect;
    real_destroy_id_fleet2_removal: DestroyId / FleetOfTwo / Removal;
    real_destroy_id_fleet1_lost_mid_apply: DestroyId / FleetOfOne / LostMidApply;
    real_destroy_prune_fleet2_lost_mid_apply: DestroyPrune / FleetOfTwo / LostMidApply;
    real_destroy_prune_one_deadline: DestroyPrune / One / Deadline;
    real_prune_one_removal: Prune / One / Removal;
    real_prune_fleet2_unreachable: Prune / FleetOfTwo / Unreachable;
    real_destroy_unknown_fleet2_list_volumes: DestroyUnknown / FleetOfTwo / ListVolumes;
    real_destroy_unknown_one_deadline: DestroyUnknown / One / Deadline;
    real_apply_one_inspect_hangs: Apply / One / InspectHangs;
    real_watch_once_one_unreachable: WatchOnce / One / Unreachable;
    real_watch_once_fleet2_list_volumes: WatchOnce / FleetOfTwo / ListVolumes;
    real_watch_once_fleet1_verify_listing: WatchOnce / FleetOfOne / VerifyListing;
    real_watch_one_list_networks: Watch / One / ListNetworks;
    real_watch_fleet2_unreachable: Watch / FleetOfTwo / Unreachable;
    real_lease_one_create: Lease / One / Create;
    real_lease_fleet2_list_volumes: Lease / FleetOfTwo / ListVolumes;
    real_lease_fleet1_removal: Lease / FleetOfOne / Removal;
    real_release_fleet2_unreachable: Release / FleetOfTwo / Unreachable;
    real_release_fleet2_removal: Release / FleetOfTwo / Removal;
    real_release_one_list_volumes: Release / One / ListVolumes;
    real_release_fleet1_deadline: Release / FleetOfOne / Deadline;
    real_hold_one_removal: Hold / One / Removal;
    real_hold_fleet2_lost_mid_apply: Hold / FleetOfTwo / LostMidApply;
    real_hold_fleet1_create: Hold / FleetOfOne / Create;
    real_apply_ssh_removal: Apply / SshPort / Removal;
    real_destroy_id_ssh_inspect: DestroyId / SshPort / Inspect;
    real_apply_saved_ssh_deadline: ApplySaved / SshPort / Deadline;
    real_destroy_prune_ssh_lost_mid_apply: DestroyPrune / SshPort / LostMidApply;
    real_watch_once_ssh_unreachable: WatchOnce / SshPort / Unreachable;
    real_watch_ssh_list_volumes: Watch / SshPort / ListVolumes;
    real_lease_ssh_create: Lease / SshPort / Create;
}

/// The slice holds every command, shape and fault at least once: the
/// converging commands together every shape and every fault of theirs, the
/// lease commands together every shape and every fault of theirs.
trial!(the_real_slice_covers_every_command_shape_and_fault);
fn the_real_slice_covers_every_command_shape_and_fault() {
    for command in Command::ALL
        .into_iter()
        .filter(|c| !c.archive() && !c.read_only())
    {
        assert!(
            REAL_SLICE.iter().any(|c| c.command == command),
            "no real cell runs {}",
            command.name()
        );
    }
    for command in Command::ALL {
        let groups = [
            &Command::CONVERGING[..],
            &Command::LEASES[..],
            &Command::ARCHIVE[..],
            &Command::READ_ONLY[..],
        ];
        assert!(
            groups.iter().filter(|g| g.contains(&command)).count() == 1,
            "{} is in neither group or in both",
            command.name()
        );
    }
    for (what, commands) in [
        ("converging", &Command::CONVERGING[..]),
        ("lease", &Command::LEASES[..]),
    ] {
        let cells: Vec<&Cell> = REAL_SLICE
            .iter()
            .filter(|c| commands.contains(&c.command))
            .collect();
        let faults: BTreeSet<Fault> = commands
            .iter()
            .flat_map(|c| c.faults().iter().copied())
            .collect();
        for shape in Shape::ALL {
            assert!(
                cells.iter().any(|c| c.shape == shape),
                "no real {what} cell on {}",
                shape.name()
            );
        }
        for fault in faults {
            assert!(
                cells.iter().any(|c| c.fault == fault),
                "no real {what} cell with {}",
                fault.name()
            );
        }
    }
    let distinct: BTreeSet<&Cell> = REAL_SLICE.iter().collect();
    assert_eq!(
        distinct.len(),
        REAL_SLICE.len(),
        "a real cell is listed twice"
    );
    for fault in Fault::ALL {
        assert!(
            Command::ALL.iter().any(|c| c.faults().contains(&fault))
                || Fault::SWARM.contains(&fault),
            "no command makes the call {} breaks",
            fault.name()
        );
    }
    for shape in Shape::REAL_ONLY {
        assert!(
            REAL_SLICE.iter().any(|c| c.shape == shape),
            "no real cell on {}",
            shape.name()
        );
    }
    let all = Cell::all();
    assert_eq!(
        all.len(),
        7 * 3 * 11 + 3 * 7 + 3 * (6 + 5 + 5) + 3 * (7 + 5) + 3 * (7 + 6 + 7 + 7)
    );
    assert!(REAL_SLICE.iter().all(|c| all.contains(&Cell::new(
        c.command,
        c.shape.in_memory(),
        c.fault
    ))));
}

mod real {
    //! One cell against real engines: the built binary, the main engine
    //! behind the fault proxy, the shared second dockerd behind a recording
    //! proxy. The cell runs twice, on two worlds of their own scopes at once:
    //! `--format json` and `--format human` (a running watch: JSON only).

    use std::collections::{BTreeMap, BTreeSet, HashMap};
    use std::time::{Duration, Instant};

    use bollard::query_parameters::{
        InspectContainerOptions, ListVolumesOptions, ListVolumesOptionsBuilder,
    };
    use bollard::Docker;

    use super::{
        verdict, Cell, Command, Fault, LeaseRunSeen, LeaseSeen, Removals, Seen, Shape, WatchSeen,
        BOX,
    };
    use crate::support::cli::{Cli, Output, Running};
    use crate::support::docker::{ContainerSpec, Run, Sandbox, VolumeSpec, SCOPE_KEY};
    use crate::support::engines::{Corner, Engine, SecondDockerd, SshServer, Sshd};
    use crate::support::lease::{LEASE_PREFIX, LEASE_TTL};
    use crate::support::proxy::Proxy;

    /// The `--timeout` of a deadline cell: the delayed listing fails after it.
    const DEADLINE_SECS: &str = "2";
    /// The same over ssh: `--timeout` bounds connecting too, and the first
    /// connection (a handshake, a session, the remote docker CLI starting)
    /// can take more than 2 s on a loaded machine.
    const SSH_DEADLINE_SECS: &str = "20";
    /// How long a delayed call is held (far past the deadline).
    const HELD: Duration = Duration::from_secs(60);
    /// How long a run may take before the test fails.
    const RUN_DEADLINE: Duration = Duration::from_secs(120);
    /// How long a running watch gets for its first cycles.
    const FIRST_CYCLES: Duration = Duration::from_secs(60);

    /// One engine's objects of a world (names, and IDs where there are).
    #[derive(Debug, Clone)]
    struct Objects {
        container_id: String,
        container: String,
        volume: String,
        /// The box's network, `(ID, name)`: none in a lease command's world
        /// (the engines' address pools bound how many networks the cells
        /// running at once can have, and a lease command touches none).
        network: Option<(String, String)>,
        leak: String,
        /// `ca.sandbox=true` with the scope label: not managed, must survive.
        decoy: String,
        /// An unlabeled running container made after the box's (which then
        /// runs; the main engine's, in an [`Fault::InspectHangs`] cell): its
        /// inspection hangs.
        bystander: Option<String>,
    }

    impl Objects {
        /// What a command may remove here: `(kind path segment, id or name)`.
        fn removable(&self, command: Command) -> BTreeSet<String> {
            if !command.removes_box() {
                return BTreeSet::new();
            }
            let mut all: BTreeSet<String> = [
                format!("/containers/{}", self.container_id),
                format!("/volumes/{}", self.volume),
            ]
            .into();
            if let Some((id, _)) = &self.network {
                all.insert(format!("/networks/{id}"));
            }
            if command.removes_leaks() {
                all.insert(format!("/volumes/{}", self.leak));
            }
            all
        }

        /// What the command must remove here, by kind.
        fn removals(&self, command: Command) -> Removals {
            if !command.removes_box() {
                return Removals::default();
            }
            let mut r = Removals {
                containers: [self.container.clone()].into(),
                volumes: [self.volume.clone()].into(),
                networks: self.network.iter().map(|(_, n)| n.clone()).collect(),
                swarm: BTreeSet::new(),
            };
            if command.removes_leaks() {
                r.volumes.insert(self.leak.clone());
            }
            r
        }
    }

    /// The main engine's part of a world, made through the harness (the
    /// box's network only when `networked`).
    async fn main_objects(sbx: &Sandbox, networked: bool, bystander: bool) -> Objects {
        // With a bystander, the box runs: the bystander could have joined it.
        let run = if bystander {
            Run::Running
        } else {
            Run::Created
        };
        let doomed = async {
            if networked {
                let b = sbx.add_box_with_network(BOX, run).await;
                (b.container, b.volume, Some((b.network.id, b.network.name)))
            } else {
                let b = sbx.add_box(BOX, run).await;
                (b.container, b.volume, None)
            }
        };
        let ((container, volume, network), leak, decoy) = tokio::join!(
            doomed,
            sbx.leaked_volume(),
            sbx.volume(VolumeSpec::new().label("ca.sandbox", "true")),
        );
        let bystander = if bystander {
            let spec = ContainerSpec::new().unscoped().run(Run::Running);
            Some(sbx.container(spec).await.id)
        } else {
            None
        };
        Objects {
            container_id: container.id,
            container: container.name,
            volume,
            network,
            leak,
            decoy,
            bystander,
        }
    }

    /// The second dockerd's part of the same world, in the same scope.
    async fn second_objects(corner: &Corner, networked: bool) -> Objects {
        let labels = [("ca.sandbox", "1"), ("ca.sandbox.id", BOX)];
        let volume_name = corner.unique(&format!("{BOX}-data"));
        let network = corner.unique(&format!("{BOX}-net"));
        let (volume, network_id, leak, decoy) = tokio::join!(
            corner.volume(Some(&volume_name), &labels),
            async {
                if networked {
                    Some(corner.network(&network, &labels).await)
                } else {
                    None
                }
            },
            corner.leaked_volume("leak"),
            corner.volume(None, &[("ca.sandbox", "true")]),
        );
        let container = corner.unique(BOX);
        let container_id = corner
            .container(
                &container,
                &labels,
                &[&volume],
                network_id.as_ref().map(|_| network.as_str()),
                false,
            )
            .await;
        Objects {
            container_id,
            container,
            volume,
            network: network_id.map(|id| (id, network)),
            leak,
            decoy,
            bystander: None,
        }
    }

    /// The lease volumes of a lease command's world, the same names on
    /// every engine of it (they carry the world's scope value): box
    /// `doomed`'s old lease (ttl 60s, made with the world: `lease --ttl 10m`
    /// replaces it, `lease --release` removes it, `hold` leaves it) and
    /// three lease look-alikes that must survive.
    #[derive(Debug, Clone)]
    struct LeaseObjects {
        old: String,
        /// `ca.sandbox=true`, another box's (`spared`), another scope's.
        outside: [String; 3],
    }

    /// The ttl label of the world's leases.
    const OLD_TTL: &str = "60s";

    impl LeaseObjects {
        fn of(scope: &str) -> LeaseObjects {
            LeaseObjects {
                old: format!("{LEASE_PREFIX}{BOX}-{scope}-old"),
                outside: [
                    format!("{LEASE_PREFIX}{BOX}-{scope}-lookalike"),
                    format!("{LEASE_PREFIX}spared-{scope}"),
                    format!("{LEASE_PREFIX}{BOX}-{scope}-other-scope"),
                ],
            }
        }

        /// `(name, ca.sandbox, ca.sandbox.id, scoped)` of each lease volume.
        fn specs(&self) -> [(&str, &'static str, &'static str, bool); 4] {
            [
                (&self.old, "1", BOX, true),
                (&self.outside[0], "true", BOX, true),
                (&self.outside[1], "1", "spared", true),
                (&self.outside[2], "1", BOX, false),
            ]
        }

        /// Made on the main engine (another scope's: the scope label of
        /// another value, recorded by name so the `Sandbox` removes it).
        async fn make_on_main(&self, sbx: &Sandbox) {
            let other = format!("{}-other", sbx.scope_value());
            let made = self.specs().map(|(name, sandbox, box_id, scoped)| {
                let mut spec = VolumeSpec::new()
                    .name(name)
                    .label("ca.sandbox", sandbox)
                    .label("ca.sandbox.id", box_id)
                    .label(LEASE_TTL, OLD_TTL);
                if !scoped {
                    spec = spec.unscoped().label(SCOPE_KEY, &other);
                }
                sbx.volume(spec)
            });
            futures_util::future::join_all(made).await;
        }

        /// Made on a corner of the second dockerd (the same way).
        async fn make_on(&self, corner: &Corner) {
            let other = format!("{}-other", corner.scope_value());
            for (name, sandbox, box_id, scoped) in self.specs() {
                let labels = [
                    ("ca.sandbox", sandbox),
                    ("ca.sandbox.id", box_id),
                    (LEASE_TTL, OLD_TTL),
                ];
                if scoped {
                    corner.volume(Some(name), &labels).await;
                } else {
                    let mut labels = labels.to_vec();
                    labels.push((SCOPE_KEY, &other));
                    corner.unscoped_volume(name, &labels).await;
                }
            }
        }
    }

    /// Every volume on the engine `docker`: names.
    async fn all_volumes(docker: &Docker) -> BTreeSet<String> {
        docker
            .list_volumes(None::<ListVolumesOptions>)
            .await
            .unwrap_or_else(|e| panic!("list volumes: {e}"))
            .volumes
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.name)
            .collect()
    }

    /// The volumes of scope `scope` on the engine `docker`: name → labels.
    async fn scoped_volumes(
        docker: &Docker,
        scope: &str,
    ) -> BTreeMap<String, HashMap<String, String>> {
        let label = format!("{SCOPE_KEY}={scope}");
        let filters = HashMap::from([("label", vec![label.as_str()])]);
        let options = ListVolumesOptionsBuilder::new().filters(&filters).build();
        docker
            .list_volumes(Some(options))
            .await
            .unwrap_or_else(|e| panic!("list the volumes of scope {scope}: {e}"))
            .volumes
            .unwrap_or_default()
            .into_iter()
            .filter(|v| v.labels.get(SCOPE_KEY).map(String::as_str) == Some(scope))
            .map(|v| (v.name, v.labels))
            .collect()
    }

    /// The healthy engine of a fleet of two: its objects and the proxy that records its calls.
    struct Healthy {
        corner: Corner,
        objects: Objects,
        proxy: Proxy,
    }

    /// One run of a cell: a world in a scope of its own and the CLI pointed at it.
    struct World {
        cell: Cell,
        sbx: Sandbox,
        main: Objects,
        /// `None` once stopped (the unreachable fault): its socket is gone.
        faulty: Option<Proxy>,
        healthy: Option<Healthy>,
        cli: Cli,
        saved: String,
        /// A lease command's lease volumes (on every engine of the world).
        leases: Option<LeaseObjects>,
        /// [`Shape::SshPort`]: the sshd in front of the faulty engine.
        sshd: Option<Sshd>,
    }

    impl World {
        async fn new(cell: Cell, format: &str, second: Option<&Engine>) -> World {
            let test = format!(
                "mx-{:?}-{:?}-{:?}-{format}",
                cell.command, cell.shape, cell.fault
            );
            let sbx = Sandbox::new(&test).await;
            let faulty = Proxy::start();
            let sshd = match cell.shape {
                Shape::SshPort => Some(SshServer::to_host(&faulty.docker_host()).start().await),
                _ => None,
            };
            let leases = cell
                .command
                .leases()
                .then(|| LeaseObjects::of(sbx.scope_value()));
            let healthy = async {
                let engine = second?;
                let corner = Corner::on(engine, sbx.scope_value());
                let objects = second_objects(&corner, !cell.command.leases()).await;
                if let Some(leases) = &leases {
                    leases.make_on(&corner).await;
                }
                let proxy = Proxy::start_to(engine.socket());
                Some(Healthy {
                    corner,
                    objects,
                    proxy,
                })
            };
            let main = async {
                let (main, ()) = tokio::join!(
                    main_objects(
                        &sbx,
                        !cell.command.leases(),
                        cell.fault == Fault::InspectHangs
                    ),
                    async {
                        if let Some(leases) = &leases {
                            leases.make_on_main(&sbx).await;
                        }
                    }
                );
                main
            };
            let (main, healthy) = tokio::join!(main, healthy);
            let mut state = sbx.scope_toml();
            if !matches!(cell.shape, Shape::One | Shape::SshPort) {
                state.push_str(&format!(
                    "\n[[engine]]\nname = \"{}\"\nhost = \"{}\"\n",
                    super::FAULTY,
                    faulty.docker_host()
                ));
            }
            if let Some(h) = &healthy {
                state.push_str(&format!(
                    "\n[[engine]]\nname = \"{}\"\nhost = \"{}\"\n",
                    super::HEALTHY,
                    h.proxy.docker_host()
                ));
            }
            let mut cli = Cli::new()
                .docker_host(
                    &sshd
                        .as_ref()
                        .map_or_else(|| faulty.docker_host(), Sshd::docker_host),
                )
                .env_remove("DOCKER_CONTEXT")
                .state_toml(&state)
                .args(["--format", format])
                .deadline(RUN_DEADLINE);
            if cell.fault == Fault::InspectHangs {
                cli = cli.args(["--call-timeout", DEADLINE_SECS]);
            }
            if cell.fault == Fault::Deadline {
                let secs = match cell.shape {
                    Shape::SshPort => SSH_DEADLINE_SECS,
                    _ => DEADLINE_SECS,
                };
                cli = cli.args(["--timeout", secs]);
            }
            if let Some(sshd) = &sshd {
                cli = cli.env("PATH", sshd.wrapper_path());
            }
            let saved = cli.dir().join("plan.json").display().to_string();
            World {
                cell,
                sbx,
                main,
                faulty: Some(faulty),
                healthy,
                cli,
                saved,
                leases,
                sshd,
            }
        }

        /// [`Shape::SshPort`]: an `ssh` client of the run still running
        /// a second after it ended (none may outlive the run). sandboxctl's
        /// ssh processes are SIGKILLed as it ends (`kill_on_drop`, and
        /// `PR_SET_PDEATHSIG` as it exits), and a signal takes effect only
        /// once the process runs again: in the full suite a client was seen
        /// still running right after the run's exit had been reaped.
        async fn ssh_left(&self) -> Vec<String> {
            let Some(sshd) = &self.sshd else {
                return Vec::new();
            };
            let ended = Instant::now();
            let until = ended + Duration::from_secs(1);
            let mut lingered = Vec::new();
            loop {
                let clients = sshd.clients();
                if clients.is_empty() {
                    if !lingered.is_empty() {
                        eprintln!(
                            "ssh clients {lingered:?} went {:?} after the run ended",
                            ended.elapsed()
                        );
                    }
                    return Vec::new();
                }
                lingered = clients.clone();
                if Instant::now() >= until {
                    return vec![format!(
                        "ssh clients outlived the run by a second: {clients:?}"
                    )];
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }

        /// Saves the plan of `apply FILE` while every engine is healthy.
        fn prepare(&self) {
            if self.cell.command == Command::ApplySaved {
                self.cli
                    .run_with(["plan", "--out", &self.saved])
                    .expect_code(0);
            }
        }

        /// Breaks the faulty engine as the cell says.
        fn inject(&mut self) {
            let message = format!("matrix fault: {}", self.cell.fault.name());
            if self.cell.fault == Fault::Unreachable {
                // Its socket (and folder) go with it: nothing answers there.
                self.faulty = None;
                return;
            }
            let proxy = self.faulty.as_ref().expect("the faulty proxy runs");
            if let Some(leases) = &self.leases {
                // The lease commands' calls (as `memory::inject_lease`): the
                // box's old lease's removal (`hold`: any removal, its own
                // lease's name is made up at run time); the first call past
                // its deadline: the create, `lease --release`'s listing.
                let command = self.cell.command;
                match self.cell.fault {
                    Fault::Create => proxy
                        .on("POST", "/volumes/create")
                        .always()
                        .respond(500, &message),
                    Fault::ListVolumes => {
                        proxy.on("GET", "/volumes?").always().respond(500, &message)
                    }
                    Fault::Removal if command == Command::Hold => proxy
                        .on("DELETE", "/volumes/")
                        .always()
                        .respond(500, &message),
                    Fault::Removal => proxy
                        .on("DELETE", &format!("/volumes/{}", leases.old))
                        .always()
                        .respond(500, &message),
                    Fault::LostMidApply => proxy.on("DELETE", "").cut(),
                    Fault::Deadline if command == Command::Release => {
                        proxy.on("GET", "/volumes?").always().delay(HELD)
                    }
                    Fault::Deadline => proxy.on("POST", "/volumes/create").always().delay(HELD),
                    other => unreachable!(
                        "{} makes no call that {} breaks",
                        command.name(),
                        other.name()
                    ),
                }
                return;
            }
            match self.cell.fault {
                Fault::Unreachable => unreachable!("handled above"),
                Fault::ListContainers => proxy
                    .on("GET", "/containers/json")
                    .always()
                    .respond(500, &message),
                Fault::ListVolumes => proxy.on("GET", "/volumes?").always().respond(500, &message),
                Fault::ListNetworks => proxy
                    .on("GET", "/networks?")
                    .always()
                    .respond(500, &message),
                Fault::ListImages => proxy
                    .on("GET", "/images/json")
                    .always()
                    .respond(500, &message),
                Fault::Inspect => proxy
                    .on("GET", &format!("/volumes/{}", self.main.volume))
                    .always()
                    .respond(500, &message),
                Fault::Removal => proxy
                    .on("DELETE", &format!("/containers/{}", self.main.container_id))
                    .always()
                    .respond(500, &message),
                Fault::VerifyListing => {
                    // The first listing round (managed, then all containers) passes.
                    proxy.on("GET", "/containers/json").times(2).forward();
                    proxy
                        .on("GET", "/containers/json")
                        .always()
                        .respond(500, &message);
                }
                Fault::LostMidApply => proxy.on("DELETE", "").cut(),
                Fault::Deadline => proxy.on("GET", "/containers/json").always().delay(HELD),
                Fault::InspectHangs => {
                    let id = self.main.bystander.as_ref().expect("made for this fault");
                    proxy
                        .on("GET", &format!("/containers/{id}/json"))
                        .always()
                        .delay(HELD)
                }
                Fault::Create => proxy
                    .on("POST", "/volumes/create")
                    .always()
                    .respond(500, &message),
                other => unreachable!("no real cell has the fault {}", other.name()),
            }
        }

        fn start(&self) -> Running {
            self.cli
                .spawn_with(self.cell.command.args(self.cell.shape, &self.saved))
        }

        /// Every way this world's engines were touched outside what the command may remove.
        async fn touched_outside(&self) -> Vec<String> {
            let mut problems = Vec::new();
            let mut proxies = Vec::new();
            if let Some(p) = &self.faulty {
                proxies.push((self.cell.shape.faulty(), p, &self.main));
            }
            if let Some(h) = &self.healthy {
                proxies.push((super::HEALTHY, &h.proxy, &h.objects));
            }
            for (engine, proxy, objects) in proxies {
                let allowed = objects.removable(self.cell.command);
                for seen in proxy.requests("DELETE", "") {
                    let target = seen.path.split('?').next().unwrap_or_default();
                    if !allowed.contains(target) {
                        problems.push(format!(
                            "engine {engine}: DELETE {target} is outside what {} may remove",
                            self.cell.command.name()
                        ));
                    }
                }
                for seen in proxy.seen() {
                    if seen.by_client()
                        && !matches!(seen.method.as_str(), "GET" | "HEAD" | "DELETE")
                    {
                        problems.push(format!("engine {engine}: unexpected {}", seen.line()));
                    }
                }
            }
            if !self.sbx.volume_exists(&self.main.decoy).await {
                problems.push(format!(
                    "the look-alike volume {} was removed",
                    self.main.decoy
                ));
            }
            if let Some(h) = &self.healthy {
                if !h.corner.volume_exists(&h.objects.decoy).await {
                    problems.push(format!(
                        "the look-alike volume {} was removed on {}",
                        h.objects.decoy,
                        super::HEALTHY
                    ));
                }
            }
            problems
        }

        /// Unless the fault really happened: what says it did not. An
        /// unreachable engine shows in the report; every other fault is an
        /// answer the proxy made up (or withheld).
        fn fault_missed(&self, output: &str) -> Option<String> {
            let fired = match &self.faulty {
                None => output.contains("cannot reach the Docker engine"),
                Some(proxy) => proxy
                    .seen()
                    .iter()
                    .any(|s| !matches!(s.action.as_str(), "forward" | "actor")),
            };
            (!fired).then(|| format!("the fault ({}) never happened", self.cell.fault.name()))
        }

        /// The healthy engine really holds none of what the command removes.
        async fn healthy_left(&self) -> Vec<String> {
            let Some(h) = &self.healthy else {
                return Vec::new();
            };
            let o = &h.objects;
            let mut left = Vec::new();
            if !self.cell.command.removes_box() {
                return left;
            }
            if h.corner.container_exists(&o.container_id).await {
                left.push(format!("container {}", o.container));
            }
            if h.corner.volume_exists(&o.volume).await {
                left.push(format!("volume {}", o.volume));
            }
            if let Some((id, name)) = &o.network {
                if h.corner.network_exists(id).await {
                    left.push(format!("network {name}"));
                }
            }
            if self.cell.command.removes_leaks() && h.corner.volume_exists(&o.leak).await {
                left.push(format!("volume {}", o.leak));
            }
            left.into_iter()
                .map(|o| format!("{} still holds {o}", super::HEALTHY))
                .collect()
        }

        fn healthy_removals(&self) -> Option<Removals> {
            self.healthy
                .as_ref()
                .map(|h| h.objects.removals(self.cell.command))
        }

        /// The engines of the world: `(name in reports, harness client,
        /// recording proxy if it still runs)`.
        fn engines(&self) -> Vec<(&'static str, &Docker, Option<&Proxy>)> {
            let mut all = vec![(
                self.cell.shape.faulty(),
                self.sbx.docker(),
                self.faulty.as_ref(),
            )];
            if let Some(h) = &self.healthy {
                all.push((super::HEALTHY, h.corner.docker(), Some(&h.proxy)));
            }
            all
        }

        /// Every volume each engine holds (names, any scope), by engine name.
        async fn all_volumes(&self) -> BTreeMap<String, BTreeSet<String>> {
            let mut all = BTreeMap::new();
            for (engine, docker, _) in self.engines() {
                all.insert(engine.to_string(), all_volumes(docker).await);
            }
            all
        }

        /// The volumes of the world's scope each engine holds, by engine name.
        async fn volumes(&self) -> BTreeMap<String, BTreeSet<String>> {
            let mut all = BTreeMap::new();
            for (engine, docker, _) in self.engines() {
                let names = scoped_volumes(docker, self.sbx.scope_value()).await;
                all.insert(engine.to_string(), names.into_keys().collect());
            }
            all
        }

        /// `hold`'s command touches `ran` beside the saved plan's path.
        fn ran(&self) -> bool {
            std::path::Path::new(&self.saved)
                .with_file_name("ran")
                .exists()
        }

        /// A lease command's calls and changes outside its bounds, on every
        /// engine (as `memory::Setup::lease_touched_outside`, by the
        /// proxies' records and the engines' volumes; `before`: every
        /// volume each engine held before the run). A command that takes
        /// a lease in a fleet of two makes no call on the healthy engine.
        /// It creates nothing but a volume (`POST /volumes/create`) on the
        /// engine it takes its lease on, and every volume of the scope new
        /// since is a lease of the box in scope. It removes nothing but
        /// volumes (`DELETE /volumes/NAME`) that are the box's old lease
        /// (not `hold`) or leases of the box that did not exist before the
        /// run (those it made). The box's objects, the leak, the look-alike
        /// and the three lease look-alikes are still there, and (`hold`, or
        /// an engine the command took no lease on) the old lease.
        async fn lease_touched_outside(
            &self,
            before: &BTreeMap<String, BTreeSet<String>>,
        ) -> Vec<String> {
            let leases = self.leases.as_ref().expect("a lease command's world");
            let command = self.cell.command;
            let scope = self.sbx.scope_value();
            let made = format!("{LEASE_PREFIX}{BOX}-");
            let mut problems = Vec::new();
            for (engine, docker, proxy) in self.engines() {
                let healthy = engine == super::HEALTHY;
                let takes_here = command.takes_a_lease() && !healthy;
                let before = &before[engine];
                let calls: Vec<_> = proxy
                    .map(|p| p.seen().into_iter().filter(|s| s.by_client()).collect())
                    .unwrap_or_default();
                if healthy && command.takes_a_lease() && !calls.is_empty() {
                    problems.push(format!(
                        "{engine} was called: {}",
                        calls
                            .iter()
                            .map(|c| c.line())
                            .collect::<Vec<_>>()
                            .join("; ")
                    ));
                }
                for call in &calls {
                    let path = call.path.split('?').next().unwrap_or_default();
                    let allowed = match call.method.as_str() {
                        "GET" | "HEAD" => true,
                        "POST" => takes_here && path == "/volumes/create",
                        "DELETE" => path.strip_prefix("/volumes/").is_some_and(|name| {
                            (name == leases.old && command != Command::Hold)
                                || (name.starts_with(&made) && !before.contains(name))
                        }),
                        _ => false,
                    };
                    if !allowed {
                        problems.push(format!(
                            "engine {engine}: {} is out of bounds for {}",
                            call.line(),
                            command.name()
                        ));
                    }
                }
                for (name, labels) in scoped_volumes(docker, scope).await {
                    if before.contains(&name) {
                        continue;
                    }
                    let label = |k: &str| labels.get(k).map(String::as_str);
                    let a_lease = name.starts_with(&made)
                        && label("ca.sandbox") == Some("1")
                        && label("ca.sandbox.id") == Some(BOX)
                        && label(LEASE_TTL).is_some();
                    if !takes_here {
                        problems.push(format!(
                            "engine {engine}: created {name} {labels:?}, but {} takes no lease here",
                            command.name()
                        ));
                    } else if !a_lease {
                        problems.push(format!(
                            "engine {engine}: created {name} {labels:?}, not a lease of {BOX}"
                        ));
                    }
                }
                let objects = match &self.healthy {
                    Some(h) if healthy => &h.objects,
                    _ => &self.main,
                };
                let now = all_volumes(docker).await;
                let mut stay: Vec<&str> = vec![&objects.volume, &objects.leak, &objects.decoy];
                stay.extend(leases.outside.iter().map(String::as_str));
                if command == Command::Hold || (healthy && command.takes_a_lease()) {
                    stay.push(&leases.old);
                }
                for name in stay {
                    if !now.contains(name) {
                        problems.push(format!("engine {engine}: volume {name} is gone"));
                    }
                }
                let container = docker
                    .inspect_container(&objects.container_id, None::<InspectContainerOptions>)
                    .await;
                if container.is_err() {
                    problems.push(format!(
                        "engine {engine}: container {} is gone",
                        objects.container
                    ));
                }
            }
            problems
        }

        fn requests(&self) -> String {
            let mut text = String::new();
            if let Some(p) = &self.faulty {
                text.push_str(&format!("--- faulty engine's requests\n{}\n", p.dump()));
            }
            if let Some(h) = &self.healthy {
                text.push_str(&format!(
                    "--- healthy engine's requests\n{}\n",
                    h.proxy.dump()
                ));
            }
            text
        }
    }

    /// Runs `cell` against the real engines and fails naming it unless every
    /// promise holds.
    pub async fn run(cell: Cell) {
        let started = Instant::now();
        // The gate: without an engine the cell is reported ignored here.
        crate::support::docker::engine_version();
        let second = match cell.shape {
            Shape::FleetOfTwo => Some(SecondDockerd::new().tcp().shared().await),
            _ => None,
        };
        let (seen, mut problems, healthy) = if cell.command == Command::Watch {
            run_watch(cell, second.as_ref()).await
        } else if cell.command.leases() {
            run_lease(cell, second.as_ref()).await
        } else {
            run_once(cell, second.as_ref()).await
        };
        problems.extend(verdict(cell, &seen, healthy.as_ref()));
        eprintln!(
            "matrix cell {cell}: {} in {:.1?}{}",
            if problems.is_empty() { "ok" } else { "FAILS" },
            started.elapsed(),
            problems
                .iter()
                .map(|p| format!("\n  - {p}"))
                .collect::<String>()
        );
        super::assert_cell(cell, &seen, &problems);
    }

    fn output_dump(label: &str, out: &Output) -> String {
        format!("=== {label} run\n{}\n", out.dump())
    }

    /// What a cell's runs showed, the problems found on the engines, and
    /// what the healthy engine's part must have removed.
    type Ran = (Seen, Vec<String>, Option<Removals>);

    /// A one-shot command: the JSON and the human world run at once.
    async fn run_once(cell: Cell, second: Option<&Engine>) -> Ran {
        let (mut json, mut human) = tokio::join!(
            World::new(cell, "json", second),
            World::new(cell, "human", second)
        );
        json.prepare();
        human.prepare();
        json.inject();
        human.inject();
        let (json_run, human_run) = (json.start(), human.start());
        let (json_out, human_out) = (json_run.wait(), human_run.wait());
        crate::support::schema::check_output(&json_out);
        let mut problems = Vec::new();
        for (world, out) in [(&json, &json_out), (&human, &human_out)] {
            problems.extend(world.ssh_left().await);
            problems.extend(world.fault_missed(&format!("{}{}", out.stdout, out.stderr)));
            problems.extend(world.touched_outside().await);
            problems.extend(world.healthy_left().await);
        }
        let report = serde_json::from_str(&json_out.stdout).map_err(|e| e.to_string());
        let dump = format!(
            "{}{}{}{}",
            output_dump("json", &json_out),
            json.requests(),
            output_dump("human", &human_out),
            human.requests()
        );
        let seen = Seen {
            exit: json_out.code,
            report,
            human: Some(human_out.stdout.clone()),
            watch: None,
            lease: None,
            restore: None,
            read_only: None,
            dump,
        };
        (seen, problems, json.healthy_removals())
    }

    /// A lease command: the JSON and the human world run at once; what each
    /// engine held after each run, and what was touched out of bounds.
    async fn run_lease(cell: Cell, second: Option<&Engine>) -> Ran {
        let (mut json, mut human) = tokio::join!(
            World::new(cell, "json", second),
            World::new(cell, "human", second)
        );
        json.inject();
        human.inject();
        let (json_before, human_before) = tokio::join!(json.all_volumes(), human.all_volumes());
        let (json_run, human_run) = (json.start(), human.start());
        let (json_out, human_out) = (json_run.wait(), human_run.wait());
        crate::support::schema::check_output(&json_out);
        let mut problems = Vec::new();
        let mut runs = Vec::new();
        for (world, out, before) in [
            (&json, &json_out, &json_before),
            (&human, &human_out, &human_before),
        ] {
            problems.extend(world.ssh_left().await);
            problems.extend(world.fault_missed(&format!("{}{}", out.stdout, out.stderr)));
            problems.extend(world.lease_touched_outside(before).await);
            runs.push(LeaseRunSeen {
                exit: out.code,
                stdout: out.stdout.clone(),
                stderr: out.stderr.clone(),
                volumes: world.volumes().await,
                ran: world.ran(),
                old_lease: world.leases.as_ref().expect("lease world").old.clone(),
            });
        }
        let human_seen = runs.pop().expect("two runs");
        let json_seen = runs.pop().expect("two runs");
        let dump = format!(
            "{}{}{}{}",
            output_dump("json", &json_out),
            json.requests(),
            output_dump("human", &human_out),
            human.requests()
        );
        let seen = Seen {
            exit: json_out.code,
            report: Err("a lease command prints no report".into()),
            human: None,
            watch: None,
            restore: None,
            read_only: None,
            lease: Some(LeaseSeen {
                json: json_seen,
                human: human_seen,
                mcp: false,
            }),
            dump,
        };
        (seen, problems, None)
    }

    /// A running watch: first cycles, `/healthz`, SIGTERM, the final report.
    async fn run_watch(cell: Cell, second: Option<&Engine>) -> Ran {
        let mut world = World::new(cell, "json", second).await;
        world.prepare();
        world.inject();
        let running = world.start();
        let mut watch = WatchSeen::default();
        let mut problems = Vec::new();
        let engines: Vec<&str> = [Some(cell.shape.faulty()), cell.shape.healthy()]
            .into_iter()
            .flatten()
            .collect();
        let until = Instant::now() + FIRST_CYCLES;
        let mut addr = None;
        loop {
            let log = super::json_lines(&running.stderr_so_far());
            if addr.is_none() {
                addr = log
                    .iter()
                    .find(|l| l["event"] == "started")
                    .and_then(|l| l["metrics"].as_str().map(str::to_string));
            }
            let cycled = |engine: &str| {
                log.iter().any(|l| {
                    l["engine"] == engine && (l["event"] == "cycle" || l["event"] == "cycleFailed")
                })
            };
            if addr.is_some() && engines.iter().all(|e| cycled(e)) {
                break;
            }
            if Instant::now() > until || exited(&running) {
                problems.push(format!(
                    "no cycle line of every engine ({engines:?}) within {FIRST_CYCLES:?}"
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if let Some(addr) = &addr {
            watch.healthz = super::http_status(addr, "/healthz").await;
        } else {
            problems.push("no `started` line with the metrics address".into());
        }
        terminate(&running);
        let out = running.wait();
        crate::support::schema::check_output(&out);
        watch.log = crate::support::schema::check_lines("watch-line", &out.stderr, &out.command);
        problems.extend(world.ssh_left().await);
        problems.extend(world.fault_missed(&out.stderr));
        problems.extend(world.touched_outside().await);
        problems.extend(world.healthy_left().await);
        let seen = Seen {
            exit: out.code,
            report: serde_json::from_str(&out.stdout).map_err(|e| e.to_string()),
            human: None,
            watch: Some(watch),
            lease: None,
            restore: None,
            read_only: None,
            dump: format!("{}{}", output_dump("watch", &out), world.requests()),
        };
        (seen, problems, world.healthy_removals())
    }

    fn exited(running: &Running) -> bool {
        let status = std::fs::read_to_string(format!("/proc/{}/status", running.pid()));
        !status.is_ok_and(|s| {
            !s.lines()
                .any(|l| l.starts_with("State:") && l.contains('Z'))
        })
    }

    fn terminate(running: &Running) {
        let pid = libc::pid_t::try_from(running.pid()).expect("pid fits pid_t");
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
}

/// The JSON lines among `text`'s complete lines.
fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n') && l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The status of `GET path` on `addr` (async: the server may share this
/// thread), or `None` if nothing answered within 5 s.
async fn http_status(addr: &str, path: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.ok()?;
        answer.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(std::time::Duration::from_secs(5), ask)
        .await
        .ok()
        .flatten()
}
// ----- the whole matrix, in memory -----------------------------------------------------

/// The swarm manager shape: every converging command under its faults and
/// the Swarm calls' faults, in memory (a swarm is never made on the main
/// engine, which the real cells use as the faulty one).
trial!(memory_swarm_manager);
async fn memory_swarm_manager() {
    let mut failing = Vec::new();
    let mut count = 0;
    for command in Command::CONVERGING {
        for cell in Cell::swarm(command) {
            count += 1;
            judge_in_memory(cell, Surface::Cli, &mut failing).await;
        }
    }
    assert!(
        failing.is_empty(),
        "{} of {count} in-memory swarm manager cells fail:\n{}",
        failing.len(),
        failing.join("\n")
    );
}

/// How an in-memory cell's command is run: as the CLI runs it, or as one
/// tool call to the MCP server.
#[derive(Clone, Copy)]
enum Surface {
    Cli,
    Mcp,
}

/// Runs `cell` in memory through `surface` and judges it by [`verdict`]:
/// prints one line, and appends the cell with its problems and its world's
/// dump to `failing` when it breaks a promise.
async fn judge_in_memory(cell: Cell, surface: Surface, failing: &mut Vec<String>) {
    let (seen, mut problems, healthy) = match surface {
        Surface::Cli => memory::run(cell).await,
        Surface::Mcp => memory::run_mcp(cell).await,
    };
    problems.extend(verdict(cell, &seen, Some(&healthy)));
    let through = match surface {
        Surface::Cli => "",
        Surface::Mcp => " through MCP",
    };
    eprintln!(
        "matrix cell {cell}{through} (memory): {}",
        if problems.is_empty() { "ok" } else { "FAILS" }
    );
    if !problems.is_empty() {
        failing.push(format!(
            "cell {cell}{through}:\n  - {}\n{}",
            problems.join("\n  - "),
            seen.dump
        ));
    }
}

/// Runs every shape and fault of `command` in memory and fails naming every
/// cell that breaks a promise.
async fn memory_command(command: Command) {
    let mut failing = Vec::new();
    for shape in Shape::ALL {
        for &fault in command.faults() {
            judge_in_memory(Cell::new(command, shape, fault), Surface::Cli, &mut failing).await;
        }
    }
    assert!(
        failing.is_empty(),
        "{} of {} in-memory cells of {} fail:\n{}",
        failing.len(),
        Shape::ALL.len() * command.faults().len(),
        command.name(),
        failing.join("\n")
    );
}

/// The MCP surface: every command with a tool twin ([`Command::tool`]), on
/// every shape, under every fault of its calls, through one tool call to
/// the MCP server (`run::mcp_on`) on the cell's in-memory engines. Judged
/// as the command's JSON run ([`verdict`], [`lease_verdict`],
/// [`read_only_verdict`]): the call's `isError` stands for exit 1 (false:
/// exit 0, a failure of the cell), its structured content for stdout, its
/// text (the summary and what the run said on stderr) for stderr and, for
/// a report, the human words that must claim no convergence.
trial!(memory_mcp);
async fn memory_mcp() {
    let mut failing = Vec::new();
    let mut cells = 0;
    for command in Command::ALL.into_iter().filter(|c| c.tool().is_some()) {
        for shape in Shape::ALL {
            for &fault in command.faults() {
                cells += 1;
                judge_in_memory(Cell::new(command, shape, fault), Surface::Mcp, &mut failing).await;
            }
        }
    }
    assert!(
        failing.is_empty(),
        "{} of {cells} in-memory cells through MCP fail:\n{}",
        failing.len(),
        failing.join("\n")
    );
}

trial!(memory_apply);
async fn memory_apply() {
    memory_command(Command::Apply).await;
}

trial!(memory_apply_saved);
async fn memory_apply_saved() {
    memory_command(Command::ApplySaved).await;
}

trial!(memory_destroy_id);
async fn memory_destroy_id() {
    memory_command(Command::DestroyId).await;
}

trial!(memory_destroy_prune);
async fn memory_destroy_prune() {
    memory_command(Command::DestroyPrune).await;
}

trial!(memory_prune);
async fn memory_prune() {
    memory_command(Command::Prune).await;
}

trial!(memory_destroy_unknown);
async fn memory_destroy_unknown() {
    memory_command(Command::DestroyUnknown).await;
}

trial!(memory_watch_once);
async fn memory_watch_once() {
    memory_command(Command::WatchOnce).await;
}

trial!(memory_watch);
async fn memory_watch() {
    memory_command(Command::Watch).await;
}

trial!(memory_lease);
async fn memory_lease() {
    memory_command(Command::Lease).await;
}

trial!(memory_lease_release);
async fn memory_lease_release() {
    memory_command(Command::Release).await;
}

trial!(memory_hold);
async fn memory_hold() {
    memory_command(Command::Hold).await;
}

trial!(memory_restore);
async fn memory_restore() {
    memory_command(Command::Restore).await;
}

trial!(memory_apply_archive);
async fn memory_apply_archive() {
    memory_command(Command::ApplyArchive).await;
}

trial!(memory_plan);
async fn memory_plan() {
    memory_command(Command::Plan).await;
}

trial!(memory_inventory);
async fn memory_inventory() {
    memory_command(Command::Inventory).await;
}

trial!(memory_graph);
async fn memory_graph() {
    memory_command(Command::Graph).await;
}

trial!(memory_explain);
async fn memory_explain() {
    memory_command(Command::Explain).await;
}

mod memory {
    //! One cell through the library's one run path (`run::run_on`) on
    //! in-memory engines: the same world on every engine, the fault scripted
    //! on the faulty one, the CLI's own argument parsing and config.

    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use clap::Parser;
    use sandboxctl::cli::exit::Exit;
    use sandboxctl::engine::memory::{
        ContainerInfo, FaultAction, MemoryEngine, NetworkInfo, Op, VolumeInfo, World,
    };
    use sandboxctl::engine::{Engine, EngineError, ErrorKind};
    use sandboxctl::model::{ImageInfo, Kind, Labels};
    use sandboxctl::run::{run_on, Sink};
    use tokio_util::sync::CancellationToken;

    use super::{
        Cell, Command, Fault, LeaseRunSeen, LeaseSeen, Removals, RestoreRunSeen, RestoreSeen, Seen,
        Shape, WatchSeen, ARCHIVE_DIR, ARCHIVE_FILE, BOX, FAULTY, HEALTHY, OLD_LEASE,
    };

    /// Every engine call's deadline; a delayed call is held far longer.
    const DEADLINE: Duration = Duration::from_millis(300);
    const HELD: Duration = Duration::from_secs(60);
    /// How long a running watch gets for its first cycles.
    const FIRST_CYCLES: Duration = Duration::from_secs(20);

    const SCOPE: &str = "mx";
    const CONTAINER_ID: &str = "d00d000000000000000000000000000000000000000000000000000000000001";
    const CONTAINER: &str = "doomed";
    const VOLUME: &str = "doomed-data";
    const NETWORK_ID: &str = "d00d0000000000000000000000000000000000000000000000000000000000a1";
    const NETWORK: &str = "doomed-net";
    const LEAK: &str = "leak";
    /// The swarm manager's world: box `doomed` as a Swarm service.
    const SERVICE_ID: &str = "d00d5e7v1ce000000000000a1";
    const TASK_ID: &str = "d00d7a5c00000000000000000000000000000000000000000000000000000001";
    const CONFIG_ID: &str = "d00dc0nf1g0000000000000a1";
    const SECRET_ID: &str = "d00d5ec7e70000000000000a1";
    /// Outside the managed set: must survive every cell.
    const OUTSIDE: [&str; 3] = ["lookalike", "other-scope", "bystander"];
    /// The unlabeled running container of every engine's world.
    const BYSTANDER_ID: &str = "b0b0000000000000000000000000000000000000000000000000000000000002";
    /// Lease look-alikes of the lease commands' world: `ca.sandbox=true`,
    /// another box's lease, a lease of another scope. Must survive.
    const LEASE_OUTSIDE: [&str; 3] = [
        "ca-sbx-lease-doomed-lookalike",
        "ca-sbx-lease-spared",
        "ca-sbx-lease-doomed-other-scope",
    ];

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The world every engine holds: box `doomed` (container, volume,
    /// network), a leaked volume, and three objects outside the managed set:
    /// a look-alike volume, a volume of another scope, an unlabeled container.
    fn world() -> World {
        let created = Some("2026-01-01T00:00:00Z".to_string());
        let boxed = labels(&[
            ("ca.sandbox", "1"),
            ("ca.sandbox.id", BOX),
            ("ca.sandbox.test", SCOPE),
        ]);
        let mut doomed = ContainerInfo::new(CONTAINER_ID, CONTAINER, boxed.clone());
        doomed.mounts.insert(VOLUME.into());
        doomed.networks.insert(NETWORK_ID.into());
        doomed.created_at = created.clone();
        // Its ipc namespace is shareable: an unrelated container whose
        // inspection hangs could have joined it.
        doomed.ipc_mode = Some("shareable".into());
        let mut bystander = ContainerInfo::new(BYSTANDER_ID, "bystander", Labels::new());
        bystander.state = "running".into();
        let volume = |name: &str, labels: Labels| VolumeInfo {
            name: name.into(),
            labels,
            created_at: created.clone(),
        };
        World {
            containers: vec![doomed, bystander],
            volumes: vec![
                volume(VOLUME, boxed.clone()),
                volume(
                    LEAK,
                    labels(&[("ca.sandbox", "1"), ("ca.sandbox.test", SCOPE)]),
                ),
                volume(
                    "lookalike",
                    labels(&[("ca.sandbox", "true"), ("ca.sandbox.test", SCOPE)]),
                ),
                volume(
                    "other-scope",
                    labels(&[("ca.sandbox", "1"), ("ca.sandbox.test", "other")]),
                ),
            ],
            networks: vec![NetworkInfo {
                id: NETWORK_ID.into(),
                name: NETWORK.into(),
                labels: boxed,
                created_at: created,
            }],
            images: vec![ImageInfo {
                id: "sha256:ca5b000000000000000000000000000000000000000000000000000000000003"
                    .into(),
                tags: vec!["ca-sbx:matrix".into()],
            }],
            ..World::default()
        }
    }

    /// [`world`], and box `doomed` also run as a Swarm service: its task
    /// container (labeled as the box) on the box's network, a config and a
    /// secret; and outside the managed set an unlabeled service and a
    /// look-alike config (`ca.sandbox=true`), which must survive.
    fn swarm_world() -> World {
        use sandboxctl::engine::memory::{ServiceInfo, SwarmObjectInfo};
        let mut w = world();
        let boxed = labels(&[
            ("ca.sandbox", "1"),
            ("ca.sandbox.id", BOX),
            ("ca.sandbox.test", SCOPE),
        ]);
        let mut task_labels = boxed.clone();
        task_labels.insert("com.docker.swarm.service.id".into(), SERVICE_ID.into());
        let mut task = ContainerInfo::new(TASK_ID, "doomed-svc.1.x", task_labels);
        task.state = "running".into();
        task.networks.insert(NETWORK_ID.into());
        w.containers.push(task);
        w.services = vec![
            ServiceInfo {
                id: SERVICE_ID.into(),
                name: "doomed-svc".into(),
                labels: boxed.clone(),
                networks: [NETWORK_ID.to_string()].into(),
                mounts: Default::default(),
                configs: [CONFIG_ID.to_string()].into(),
                secrets: [SECRET_ID.to_string()].into(),
                created_at: None,
            },
            ServiceInfo {
                id: "b0b05e7v1ce00000000000002".into(),
                name: "bystander-svc".into(),
                labels: Labels::new(),
                networks: Default::default(),
                mounts: Default::default(),
                configs: Default::default(),
                secrets: Default::default(),
                created_at: None,
            },
        ];
        let object = |id: &str, name: &str, labels: Labels| SwarmObjectInfo {
            id: id.into(),
            name: name.into(),
            labels,
            created_at: None,
        };
        w.configs = vec![
            object(CONFIG_ID, "doomed-config", boxed.clone()),
            object(
                "l00kc0nf1g000000000000002",
                "lookalike-config",
                labels(&[("ca.sandbox", "true"), ("ca.sandbox.test", SCOPE)]),
            ),
        ];
        w.secrets = vec![object(SECRET_ID, "doomed-secret", boxed)];
        w
    }

    /// What the command must remove on the healthy engine.
    fn removals(command: Command) -> Removals {
        if !command.removes_box() {
            return Removals::default();
        }
        let mut r = Removals {
            containers: [CONTAINER.to_string()].into(),
            volumes: [VOLUME.to_string()].into(),
            networks: [NETWORK.to_string()].into(),
            swarm: BTreeSet::new(),
        };
        if command.removes_leaks() {
            r.volumes.insert(LEAK.into());
        }
        r
    }

    fn failure(call: &str, fault: Fault) -> EngineError {
        EngineError::new(
            call,
            ErrorKind::Other {
                status: Some(500),
                message: format!("matrix fault: {}", fault.name()),
            },
        )
    }

    /// The world of the lease commands: [`world`], and box `doomed`'s old
    /// lease ([`OLD_LEASE`], run out long ago), with lease look-alikes that
    /// must survive: `ca.sandbox=true`, another box's, another scope's.
    fn lease_world() -> World {
        let mut w = world();
        let lease = |name: &str, sandbox: &str, box_id: &str, scope: &str| VolumeInfo {
            name: name.into(),
            labels: labels(&[
                ("ca.sandbox", sandbox),
                ("ca.sandbox.id", box_id),
                ("ca.sandbox.test", scope),
                ("ca.sandbox.lease.ttl", "60s"),
            ]),
            created_at: Some("2026-01-01T00:00:00Z".into()),
        };
        w.volumes.extend([
            lease(OLD_LEASE, "1", BOX, SCOPE),
            lease(LEASE_OUTSIDE[0], "true", BOX, SCOPE),
            lease(LEASE_OUTSIDE[1], "1", "spared", SCOPE),
            lease(LEASE_OUTSIDE[2], "1", BOX, "other"),
        ]);
        w
    }

    /// Scripts the cell's fault on `engine`: on the calls of a lease
    /// command, the lease volume's (`OLD_LEASE`'s removal for `lease` and
    /// `lease --release`; any for `hold`, whose own lease has a name made up
    /// at run time), and its first call for a deadline.
    fn inject_lease(engine: &MemoryEngine, command: Command, fault: Fault) {
        let fail = |op: Op, target: Option<&str>, call: &str| {
            engine.inject(
                op,
                target,
                FaultAction::Fail(failure(call, fault)),
                usize::MAX,
            )
        };
        let old = (command != Command::Hold).then_some(OLD_LEASE);
        match fault {
            Fault::Unreachable => engine.disconnect(),
            Fault::Create => fail(Op::Create(Kind::Volume), None, "create volume"),
            Fault::ListVolumes => fail(Op::List(Kind::Volume), None, "list volumes"),
            Fault::Removal => fail(
                Op::Remove(Kind::Volume),
                old,
                &format!("remove volume {}", old.unwrap_or("(a lease)")),
            ),
            Fault::LostMidApply => {
                engine.inject(Op::Remove(Kind::Volume), None, FaultAction::Disconnect, 1)
            }
            Fault::Deadline => {
                let first = if command == Command::Release {
                    Op::List(Kind::Volume)
                } else {
                    Op::Create(Kind::Volume)
                };
                engine.inject(first, None, FaultAction::Delay(HELD), usize::MAX)
            }
            other => unreachable!(
                "{} makes no call that {} breaks",
                command.name(),
                other.name()
            ),
        }
    }

    /// Where a cut stream stops: inside the first 1024 bytes of any tar.
    const CUT: usize = 512;

    /// Scripts the cell's fault on `engine`: `restore`'s and `--archive`'s
    /// calls on any target (the helper's ID is made up at run time; every
    /// managed volume is archived); no image is the world's (see [`Setup::new`]).
    fn inject_archive(engine: &MemoryEngine, command: Command, fault: Fault) {
        let fail = |op: Op, call: &str| {
            engine.inject(
                op,
                None,
                FaultAction::Fail(failure(call, fault)),
                usize::MAX,
            )
        };
        match fault {
            Fault::Unreachable => engine.disconnect(),
            Fault::Create => fail(Op::Create(Kind::Volume), "create volume"),
            Fault::CreateHelper => fail(Op::CreateHelper, "create helper container"),
            Fault::Upload => fail(Op::Upload, "fill the helper"),
            Fault::UploadCut => engine.inject(
                Op::Upload,
                None,
                FaultAction::CutAfter(CUT, failure("fill the helper", fault)),
                usize::MAX,
            ),
            Fault::HelperRemoval => fail(Op::Remove(Kind::Container), "remove helper container"),
            Fault::Download => fail(Op::Download, "read the helper"),
            Fault::DownloadCut => engine.inject(
                Op::Download,
                None,
                FaultAction::CutAfter(CUT, failure("read the helper", fault)),
                usize::MAX,
            ),
            Fault::DownloadThenShutdown => fail(Op::Ping, "ping the engine on a new connection"),
            Fault::Deadline => {
                engine.inject(Op::Upload, None, FaultAction::Delay(HELD), usize::MAX)
            }
            Fault::NoImage => {}
            other => unreachable!(
                "{} makes no call that {} breaks",
                command.name(),
                other.name()
            ),
        }
    }

    /// Scripts the cell's fault on `engine`.
    fn inject(engine: &MemoryEngine, command: Command, fault: Fault) {
        if command.leases() {
            return inject_lease(engine, command, fault);
        }
        if command.archive() {
            return inject_archive(engine, command, fault);
        }
        let fail = |op: Op, target: Option<&str>, call: &str| {
            engine.inject(
                op,
                target,
                FaultAction::Fail(failure(call, fault)),
                usize::MAX,
            )
        };
        match fault {
            Fault::Unreachable => engine.disconnect(),
            Fault::ListContainers => fail(Op::List(Kind::Container), None, "list containers"),
            Fault::ListVolumes => fail(Op::List(Kind::Volume), None, "list volumes"),
            Fault::ListNetworks => fail(Op::List(Kind::Network), None, "list networks"),
            Fault::ListImages => fail(Op::ListImages, None, "list images"),
            Fault::Inspect => fail(
                Op::Inspect(Kind::Volume),
                Some(VOLUME),
                &format!("inspect volume {VOLUME}"),
            ),
            Fault::Removal => fail(
                Op::Remove(Kind::Container),
                Some(CONTAINER_ID),
                &format!("remove container {CONTAINER_ID}"),
            ),
            Fault::VerifyListing => {
                // The first listing round (managed, then all containers) passes.
                engine.inject(Op::List(Kind::Container), None, FaultAction::Pass, 2);
                fail(Op::List(Kind::Container), None, "list containers");
            }
            Fault::LostMidApply => {
                for kind in Kind::ALL {
                    engine.inject(Op::Remove(kind), None, FaultAction::Disconnect, 1);
                }
            }
            Fault::Deadline => engine.inject(
                Op::List(Kind::Container),
                None,
                FaultAction::Delay(HELD),
                usize::MAX,
            ),
            Fault::InspectHangs => engine.inject(
                Op::Inspect(Kind::Container),
                Some(BYSTANDER_ID),
                FaultAction::Delay(HELD),
                usize::MAX,
            ),
            Fault::ListServices => fail(Op::List(Kind::Service), None, "list services"),
            Fault::ServiceRemoval => fail(
                Op::Remove(Kind::Service),
                Some(SERVICE_ID),
                &format!("remove service {SERVICE_ID}"),
            ),
            other => unreachable!(
                "no converging command makes the call {} breaks",
                other.name()
            ),
        }
    }

    /// Text written by a run, shared with whoever watches it.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<(String, String)>>);

    impl Shared {
        fn stdout(&self) -> String {
            self.0.lock().unwrap().0.clone()
        }
        fn stderr(&self) -> String {
            self.0.lock().unwrap().1.clone()
        }
    }

    impl Sink for Shared {
        fn out(&mut self, text: &str) {
            self.0.lock().unwrap().0.push_str(text);
        }
        fn err(&mut self, text: &str) {
            self.0.lock().unwrap().1.push_str(text);
        }
    }

    /// One run of a cell: its engines, state file and saved plan path.
    struct Setup {
        cell: Cell,
        dir: tempfile::TempDir,
        faulty: Arc<MemoryEngine>,
        healthy: Option<Arc<MemoryEngine>>,
    }

    impl Setup {
        fn new(cell: Cell) -> Setup {
            let dir = tempfile::tempdir().expect("temp dir");
            let mut state = format!("[scope]\nlabels = {{ \"ca.sandbox.test\" = \"{SCOPE}\" }}\n");
            if cell.shape != Shape::One {
                state.push_str(&format!("\n[[engine]]\nname = \"{FAULTY}\"\n"));
            }
            if cell.shape == Shape::FleetOfTwo {
                state.push_str(&format!("\n[[engine]]\nname = \"{HEALTHY}\"\n"));
            }
            std::fs::write(dir.path().join("state.toml"), state).expect("write state file");
            let engine = |name: &str, no_image: bool| {
                let mut w = if cell.command.leases() {
                    lease_world()
                } else if cell.shape == Shape::SwarmManager {
                    swarm_world()
                } else {
                    world()
                };
                if no_image {
                    w.images.clear();
                }
                Arc::new(MemoryEngine::new(w).named(name).with_deadline(DEADLINE))
            };
            Setup {
                cell,
                faulty: engine(cell.shape.faulty(), cell.fault == Fault::NoImage),
                healthy: cell.shape.healthy().map(|h| engine(h, false)),
                dir,
            }
        }

        fn path(&self, name: &str) -> String {
            self.dir.path().join(name).display().to_string()
        }

        /// The config of `sandboxctl --state ... --format FORMAT <args>`, resolved as the CLI does.
        fn config(&self, format: &str, args: &[String]) -> sandboxctl::cli::config::Config {
            self.config_of("state.toml", format, args)
        }

        /// The config of a run with the state file `file` of the cell's folder.
        fn config_of(
            &self,
            file: &str,
            format: &str,
            args: &[String],
        ) -> sandboxctl::cli::config::Config {
            let state = self.path(file);
            let mut argv: Vec<String> = ["sandboxctl", "--state", &state, "--format", format]
                .iter()
                .map(|a| a.to_string())
                .collect();
            argv.extend(args.iter().cloned());
            let args = sandboxctl::cli::Cli::try_parse_from(&argv)
                .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
                .into_args()
                .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            sandboxctl::cli::config::resolve(args)
                .unwrap_or_else(|e| panic!("{argv:?}: {e:#}"))
                // The cell's own plan key (never the user's), and no memo of
                // inspections: each run of a cell meets its fault afresh, and
                // the in-memory engines of all cells share their IDs.
                .with_state_folder(self.path("state-home").into())
                .without_memo()
        }

        /// The engines the run's config names: in a fleet of two, a command
        /// that takes a lease names only the faulty one (`--engine`).
        fn engines(&self) -> Vec<Arc<dyn Engine>> {
            let mut all: Vec<Arc<dyn Engine>> = vec![self.faulty.clone()];
            if let Some(h) = self
                .healthy
                .as_ref()
                .filter(|_| !self.cell.command.one_engine())
            {
                all.push(h.clone());
            }
            all
        }

        /// `hold`'s command touches this file.
        fn ran(&self) -> bool {
            self.dir.path().join("ran").exists()
        }

        /// The volumes each engine holds now, by engine name.
        fn volumes(&self) -> BTreeMap<String, BTreeSet<String>> {
            std::iter::once(&self.faulty)
                .chain(self.healthy.as_ref())
                .map(|e| {
                    let names = e.world().volumes.into_iter().map(|v| v.name).collect();
                    (e.name().to_string(), names)
                })
                .collect()
        }

        /// A lease command's calls outside its bounds, on every engine: a
        /// volume created that is not a new lease of the box, a removal of
        /// anything but a lease it created or (`lease`, `lease --release`)
        /// the box's old lease, anything gone that is not a lease. A command
        /// that takes a lease in a fleet of two makes no call on the
        /// healthy engine (`--engine faulty`).
        fn lease_touched_outside(&self) -> Vec<String> {
            let mut problems = Vec::new();
            for engine in std::iter::once(&self.faulty).chain(self.healthy.as_ref()) {
                let name = engine.name();
                let calls = engine.calls();
                if name == HEALTHY && self.cell.command.takes_a_lease() && !calls.is_empty() {
                    problems.push(format!("{HEALTHY} was called: {calls:?}"));
                }
                let created: BTreeSet<&str> = calls
                    .iter()
                    .filter_map(|c| c.strip_prefix("Create(Volume) "))
                    .collect();
                for c in &created {
                    if !c.starts_with(&format!("ca-sbx-lease-{BOX}-")) {
                        problems.push(format!("engine {name}: created {c}, not a lease of {BOX}"));
                    }
                }
                for call in calls.iter().filter(|c| c.starts_with("Remove")) {
                    let target = call.strip_prefix("Remove(Volume) ");
                    let allowed = target.is_some_and(|t| {
                        created.contains(t)
                            || (t == OLD_LEASE && self.cell.command != Command::Hold)
                    });
                    if !allowed {
                        problems.push(format!("engine {name}: {call} is out of bounds"));
                    }
                }
                let world = engine.world();
                let mut must_stay: Vec<&str> = OUTSIDE
                    .iter()
                    .chain(LEASE_OUTSIDE.iter())
                    .chain([CONTAINER, VOLUME, LEAK, NETWORK].iter())
                    .copied()
                    .collect();
                if self.cell.command == Command::Hold {
                    must_stay.push(OLD_LEASE);
                }
                for stay in must_stay {
                    let there = world.volumes.iter().any(|v| v.name == stay)
                        || world.containers.iter().any(|c| c.name == stay)
                        || world.networks.iter().any(|n| n.name == stay);
                    if !there {
                        problems.push(format!("engine {name}: {stay} is gone"));
                    }
                }
            }
            problems
        }

        /// `restore`'s archive: `destroy doomed --archive` on an engine of
        /// its own (one engine), the volume's archive and manifest copied to
        /// [`ARCHIVE_FILE`] and its manifest name.
        async fn make_archive(&self) {
            let state = format!("[scope]\nlabels = {{ \"ca.sandbox.test\" = \"{SCOPE}\" }}\n");
            std::fs::write(self.path("maker.toml"), state).expect("write state file");
            let made = self.path("made");
            let args: Vec<String> = ["destroy", BOX, "--archive", &made]
                .iter()
                .map(|a| a.to_string())
                .collect();
            let config = self.config_of("maker.toml", "json", &args);
            let maker = MemoryEngine::new(world());
            maker.set_content(VOLUME, tar_of(&[("a.txt", 3000), ("b/c.bin", 5000)]));
            let engines: Vec<Arc<dyn Engine>> = vec![Arc::new(maker)];
            let mut sink = Shared::default();
            let exit = run_on(&config, engines, CancellationToken::new(), &mut sink).await;
            assert_eq!(exit, Exit::Success, "{}{}", sink.stdout(), sink.stderr());
            crate::support::schema::check_stdout(&args, &sink.stdout());
            let archive = files(std::path::Path::new(&made))
                .into_iter()
                .find(|f| {
                    let name = f.file_name().unwrap().to_string_lossy().into_owned();
                    name.starts_with(&format!("{VOLUME}-")) && name.ends_with(".tar.zst")
                })
                .expect("the volume's archive");
            let manifest = sandboxctl::exec::archive::manifest_path(&archive);
            let target = self.dir.path().join(ARCHIVE_FILE);
            std::fs::copy(&archive, &target).expect("copy the archive");
            std::fs::copy(&manifest, sandboxctl::exec::archive::manifest_path(&target))
                .expect("copy the manifest");
        }

        /// `apply --archive`'s checks of the faulty engine's part (`report`:
        /// the JSON run's stdout): its volumes still there and named
        /// `archiveFailed`, no helper left, no archive of it written, and in
        /// the folder only complete archive and manifest pairs (a fleet of
        /// two: the healthy engine's two volumes).
        fn archive_problems(&self, report: Option<&str>) -> Vec<String> {
            if self.cell.command != Command::ApplyArchive {
                return Vec::new();
            }
            let faulty = self.cell.shape.faulty();
            let mut problems = Vec::new();
            let world = self.faulty.world();
            for v in [VOLUME, LEAK] {
                if !world.volumes.iter().any(|w| w.name == v) {
                    problems.push(format!("{faulty}: volume {v} is gone, its archive failed"));
                }
            }
            for c in &world.containers {
                if c.name.starts_with("ca-sbx-helper") {
                    problems.push(format!("{faulty}: helper {} is left", c.name));
                }
            }
            let dir = self.dir.path().join(ARCHIVE_DIR);
            let all = files(&dir);
            for f in &all {
                let name = f.file_name().unwrap().to_string_lossy().into_owned();
                let rel = f.strip_prefix(&dir).unwrap().display().to_string();
                if f.starts_with(dir.join(faulty)) {
                    problems.push(format!("an archive file of {faulty}: {rel}"));
                }
                if let Some(base) = name.strip_suffix(".tar.zst") {
                    if !f.with_file_name(format!("{base}.json")).exists() {
                        problems.push(format!("archive {rel} has no manifest"));
                    }
                } else if let Some(base) = name.strip_suffix(".json") {
                    if !f.with_file_name(format!("{base}.tar.zst")).exists() {
                        problems.push(format!("manifest {rel} has no archive"));
                    }
                } else {
                    problems.push(format!("{rel} is no archive nor manifest"));
                }
            }
            if self.healthy.is_some() {
                for v in [VOLUME, LEAK] {
                    let archived = all.iter().any(|f| {
                        f.starts_with(dir.join(HEALTHY))
                            && f.file_name()
                                .unwrap()
                                .to_string_lossy()
                                .starts_with(&format!("{v}-"))
                    });
                    if !archived {
                        problems.push(format!("{HEALTHY}: no archive of {v}"));
                    }
                }
            }
            if let Some(report) = report {
                let doc: serde_json::Value = serde_json::from_str(report).unwrap_or_default();
                for v in [VOLUME, LEAK] {
                    let named = doc["remainingVolumes"].as_array().is_some_and(|left| {
                        left.iter().any(|l| {
                            l["engine"] == faulty
                                && l["name"] == v
                                && l["reason"]["code"] == "archiveFailed"
                        })
                    });
                    if !named {
                        problems.push(format!(
                            "the report names no archiveFailed volume {v} of {faulty}"
                        ));
                    }
                }
            }
            problems
        }

        /// `plan --out` while healthy (`apply FILE`), then the fault.
        async fn prepare(&self) {
            if self.cell.command == Command::Restore {
                self.make_archive().await;
            }
            if self.cell.command == Command::ApplySaved {
                let plan = ["plan".to_string(), "--out".into(), self.path("plan.json")];
                let config = self.config("json", &plan);
                let mut sink = Shared::default();
                let exit =
                    run_on(&config, self.engines(), CancellationToken::new(), &mut sink).await;
                crate::support::schema::check_stdout(&plan, &sink.stdout());
                assert_eq!(
                    exit,
                    Exit::Success,
                    "plan --out for {}: {}{}",
                    self.cell,
                    sink.stdout(),
                    sink.stderr()
                );
            }
            inject(&self.faulty, self.cell.command, self.cell.fault);
        }

        fn args(&self) -> Vec<String> {
            self.cell
                .command
                .args(self.cell.shape, &self.path("plan.json"))
        }

        /// What was touched outside what the command may remove, on every
        /// engine (`apply --archive`: on the faulty one no volume, whose
        /// archives fail; and the helpers it made, on every engine).
        fn touched_outside(&self) -> Vec<String> {
            let mut allowed = vec![
                format!("Remove(Container) {CONTAINER_ID}"),
                format!("Remove(Volume) {VOLUME}"),
                format!("Remove(Network) {NETWORK_ID}"),
            ];
            if !self.cell.command.removes_box() {
                allowed.clear();
            }
            if self.cell.command.removes_leaks() {
                allowed.push(format!("Remove(Volume) {LEAK}"));
            }
            if self.cell.shape == Shape::SwarmManager && self.cell.command.removes_box() {
                allowed.extend([
                    format!("Remove(Service) {SERVICE_ID}"),
                    format!("Remove(Container) {TASK_ID}"),
                    format!("Remove(Config) {CONFIG_ID}"),
                    format!("Remove(Secret) {SECRET_ID}"),
                ]);
            }
            let before: BTreeSet<String> = world().containers.into_iter().map(|c| c.id).collect();
            let mut problems = Vec::new();
            let engines = std::iter::once(&self.faulty).chain(self.healthy.as_ref());
            for engine in engines {
                let archive_failed =
                    self.cell.command == Command::ApplyArchive && engine.name() != HEALTHY;
                for call in engine.calls() {
                    let helper = self.cell.command.archive()
                        && call
                            .strip_prefix("Remove(Container) ")
                            .is_some_and(|id| !before.contains(id));
                    let volume = call.starts_with("Remove(Volume)");
                    if call.starts_with("Remove")
                        && ((!allowed.contains(&call) && !helper) || (archive_failed && volume))
                    {
                        problems.push(format!("engine {}: {call} is out of bounds", engine.name()));
                    }
                }
                let world = engine.world();
                for name in OUTSIDE {
                    let there = world.volumes.iter().any(|v| v.name == name)
                        || world.containers.iter().any(|c| c.name == name);
                    if !there {
                        problems.push(format!("engine {}: {name} is gone", engine.name()));
                    }
                }
                if self.cell.shape == Shape::SwarmManager {
                    for name in ["bystander-svc", "lookalike-config"] {
                        let there = world.services.iter().any(|s| s.name == name)
                            || world.configs.iter().any(|c| c.name == name);
                        if !there {
                            problems.push(format!("engine {}: {name} is gone", engine.name()));
                        }
                    }
                }
            }
            problems
        }

        /// Unless `output` shows the fault happened: what says it did not.
        fn fault_missed(&self, output: &str) -> Option<String> {
            let evidence = match self.cell.fault {
                Fault::Unreachable | Fault::LostMidApply => "the connection was lost",
                Fault::NoImage => "no ca-sbx:* image",
                Fault::Deadline | Fault::InspectHangs => "no answer within",
                _ => "matrix fault",
            };
            (!output.contains(evidence))
                .then(|| format!("the fault ({}) never happened", self.cell.fault.name()))
        }

        /// What the healthy engine still holds of what the command removes.
        fn healthy_left(&self) -> Vec<String> {
            let Some(healthy) = &self.healthy else {
                return Vec::new();
            };
            let world = healthy.world();
            let r = removals(self.cell.command);
            let mut left = Vec::new();
            for c in &world.containers {
                if r.containers.contains(&c.name) {
                    left.push(format!("container {}", c.name));
                }
            }
            for v in &world.volumes {
                if r.volumes.contains(&v.name) {
                    left.push(format!("volume {}", v.name));
                }
            }
            for n in &world.networks {
                if r.networks.contains(&n.name) {
                    left.push(format!("network {}", n.name));
                }
            }
            left.into_iter()
                .map(|o| format!("{HEALTHY} still holds {o}"))
                .collect()
        }
    }

    /// Runs `cell` in memory: the JSON run (and a human run on fresh engines),
    /// or a running watch. Returns what was seen, what the engines show, and
    /// what the healthy engine's part must have removed.
    pub async fn run(cell: Cell) -> (Seen, Vec<String>, Removals) {
        if cell.command.leases() {
            return run_lease(cell).await;
        }
        if cell.command == Command::Restore {
            return run_restore(cell).await;
        }
        if cell.command.read_only() {
            return run_read_only(cell).await;
        }
        let json = Setup::new(cell);
        json.prepare().await;
        let mut problems = Vec::new();
        let seen = if cell.command == Command::Watch {
            let (seen, missed) = watch(&json).await;
            problems.extend(missed);
            seen
        } else {
            let human = Setup::new(cell);
            human.prepare().await;
            let (exit, json_out) = once(&json, "json").await;
            let (_, human_out) = once(&human, "human").await;
            for (setup, out) in [(&json, &json_out), (&human, &human_out)] {
                problems.extend(setup.fault_missed(&(out.stdout() + &out.stderr())));
            }
            problems.extend(human.touched_outside());
            problems.extend(human.healthy_left());
            problems.extend(json.archive_problems(Some(&json_out.stdout())));
            problems.extend(human.archive_problems(None));
            Seen {
                exit: Some(exit.code()),
                report: serde_json::from_str(&json_out.stdout()).map_err(|e| e.to_string()),
                human: Some(human_out.stdout()),
                watch: None,
                lease: None,
                restore: None,
                read_only: None,
                dump: format!(
                    "=== json run: exit {}\n--- stdout\n{}--- stderr\n{}=== human run\n--- stdout\n{}--- stderr\n{}",
                    exit.code(),
                    json_out.stdout(),
                    json_out.stderr(),
                    human_out.stdout(),
                    human_out.stderr()
                ),
            }
        };
        problems.extend(json.touched_outside());
        problems.extend(json.healthy_left());
        (seen, problems, removals(cell.command))
    }

    /// Runs a lease command's cell in memory: the JSON run and the human
    /// run, each on fresh engines, with what the engines held after each.
    async fn run_lease(cell: Cell) -> (Seen, Vec<String>, Removals) {
        let mut problems = Vec::new();
        let mut runs = Vec::new();
        let mut dump = String::new();
        // `graph` draws DOT or Mermaid, no JSON nor human text.
        let formats = if cell.command == Command::Graph {
            ["dot", "mermaid"]
        } else {
            ["json", "human"]
        };
        for format in formats {
            let setup = Setup::new(cell);
            setup.prepare().await;
            let (exit, out) = once(&setup, format).await;
            problems.extend(setup.fault_missed(&(out.stdout() + &out.stderr())));
            problems.extend(setup.lease_touched_outside());
            dump.push_str(&format!(
                "=== {format} run: exit {}\n--- stdout\n{}--- stderr\n{}",
                exit.code(),
                out.stdout(),
                out.stderr()
            ));
            runs.push(LeaseRunSeen {
                exit: Some(exit.code()),
                stdout: out.stdout(),
                stderr: out.stderr(),
                volumes: setup.volumes(),
                ran: setup.ran(),
                old_lease: OLD_LEASE.to_string(),
            });
        }
        let human = runs.pop().expect("two runs");
        let json = runs.pop().expect("two runs");
        let seen = Seen {
            exit: json.exit,
            report: Err("a lease command prints no report".into()),
            human: None,
            watch: None,
            restore: None,
            read_only: None,
            lease: Some(LeaseSeen {
                json,
                human,
                mcp: false,
            }),
            dump,
        };
        (seen, problems, Removals::default())
    }

    /// Every file under `dir`, at any depth (none if it does not exist).
    fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return out;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                out.extend(files(&path));
            } else {
                out.push(path);
            }
        }
        out
    }

    /// A tar of files of these names and sizes (so a cut stream is cut mid-file).
    fn tar_of(entries: &[(&str, usize)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, size) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(*size as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, name, &vec![b'x'; *size][..])
                .expect("tar entry");
        }
        b.into_inner().expect("tar")
    }

    /// Runs `restore`'s cell in memory: the JSON run and the human run,
    /// each on fresh engines, with what the faulty engine held before and
    /// after each, its removals, and the healthy engine's calls.
    async fn run_restore(cell: Cell) -> (Seen, Vec<String>, Removals) {
        let mut problems = Vec::new();
        let mut runs = Vec::new();
        let mut dump = String::new();
        for format in ["json", "human"] {
            let setup = Setup::new(cell);
            setup.prepare().await;
            let names = |w: &World| {
                let volumes: BTreeSet<String> = w.volumes.iter().map(|v| v.name.clone()).collect();
                let containers: BTreeSet<String> =
                    w.containers.iter().map(|c| c.name.clone()).collect();
                let ids: BTreeSet<String> = w.containers.iter().map(|c| c.id.clone()).collect();
                (volumes, containers, ids)
            };
            let (volumes_before, containers_before, ids_before) = names(&setup.faulty.world());
            let (exit, out) = once(&setup, format).await;
            problems.extend(setup.fault_missed(&(out.stdout() + &out.stderr())));
            let (volumes, containers, _) = names(&setup.faulty.world());
            let removals: Vec<String> = setup
                .faulty
                .calls()
                .into_iter()
                .filter(|c| c.starts_with("Remove"))
                .collect();
            let helpers = removals
                .iter()
                .filter_map(|c| c.strip_prefix("Remove(Container) "))
                .filter(|id| !ids_before.contains(*id))
                .map(str::to_string)
                .collect();
            dump.push_str(&format!(
                "=== {format} run: exit {}\n--- stdout\n{}--- stderr\n{}",
                exit.code(),
                out.stdout(),
                out.stderr()
            ));
            runs.push(RestoreRunSeen {
                exit: Some(exit.code()),
                stdout: out.stdout(),
                stderr: out.stderr(),
                volumes_before,
                volumes,
                containers_before,
                containers,
                removals,
                helpers,
                healthy_calls: setup
                    .healthy
                    .as_ref()
                    .map(|h| h.calls())
                    .unwrap_or_default(),
            });
        }
        let human = runs.pop().expect("two runs");
        let json = runs.pop().expect("two runs");
        let seen = Seen {
            exit: json.exit,
            report: Err("restore prints no report".into()),
            human: None,
            watch: None,
            lease: None,
            restore: Some(RestoreSeen { json, human }),
            read_only: None,
            dump,
        };
        (seen, problems, Removals::default())
    }

    /// Runs a read-only command's cell in memory: the JSON run and the human
    /// run, each on fresh engines, with what each run touched.
    async fn run_read_only(cell: Cell) -> (Seen, Vec<String>, Removals) {
        let mut problems = Vec::new();
        let mut runs = Vec::new();
        let mut touched = Vec::new();
        let mut dump = String::new();
        let before = world();
        // `graph` draws DOT or Mermaid, no JSON nor human text.
        let formats = if cell.command == Command::Graph {
            ["dot", "mermaid"]
        } else {
            ["json", "human"]
        };
        for format in formats {
            let setup = Setup::new(cell);
            setup.prepare().await;
            let (exit, out) = once(&setup, format).await;
            problems.extend(setup.fault_missed(&(out.stdout() + &out.stderr())));
            for engine in std::iter::once(&setup.faulty).chain(setup.healthy.as_ref()) {
                let name = engine.name();
                for call in engine.calls() {
                    if call.starts_with("Remove") || call.starts_with("Create") {
                        touched.push(format!("{format} run: engine {name}: {call}"));
                    }
                }
                let now = engine.world();
                if (now.containers.len(), now.volumes.len(), now.networks.len())
                    != (
                        before.containers.len(),
                        before.volumes.len(),
                        before.networks.len(),
                    )
                {
                    touched.push(format!("{format} run: engine {name}: the world changed"));
                }
            }
            dump.push_str(&format!(
                "=== {format} run: exit {}\n--- stdout\n{}--- stderr\n{}",
                exit.code(),
                out.stdout(),
                out.stderr()
            ));
            runs.push(super::ReadOnlyRunSeen {
                exit: Some(exit.code()),
                stdout: out.stdout(),
                stderr: out.stderr(),
            });
        }
        let human = runs.pop().unwrap_or_default();
        let json = runs.pop().unwrap_or_default();
        let seen = Seen {
            exit: json.exit,
            report: Err("a read-only command prints no report".into()),
            human: None,
            watch: None,
            lease: None,
            restore: None,
            read_only: Some(super::ReadOnlySeen {
                json,
                human,
                touched,
                mcp: false,
            }),
            dump,
        };
        (seen, problems, Removals::default())
    }

    /// A cell's command as its tool twin, called once through the MCP
    /// server on the cell's engines ([`super::memory_mcp`]): what the call
    /// answered, as the JSON run of the command would show it.
    pub async fn run_mcp(cell: Cell) -> (Seen, Vec<String>, Removals) {
        let (tool, arguments) = cell.command.tool().expect("a tool twin");
        let setup = Setup::new(cell);
        setup.prepare().await;
        let before = world();
        // The server's own flags: `--engine faulty` where the command needs
        // one engine (taking a lease in a fleet of two).
        let args = setup.args();
        let mut server: Vec<String> = match args.first().map(String::as_str) {
            Some("--engine") => args[..2].to_vec(),
            _ => vec![],
        };
        server.push("mcp".into());
        let config = setup.config("json", &server);
        let (client, served) = tokio::io::duplex(1 << 20);
        let (read, write) = tokio::io::split(served);
        let mut sink = Shared::default();
        let call = [(
            "tools/call",
            serde_json::json!({ "name": tool, "arguments": arguments }),
        )];
        let (exit, (answers, _)) = tokio::join!(
            sandboxctl::run::mcp_on(
                &config,
                setup.engines(),
                read,
                write,
                CancellationToken::new(),
                &mut sink
            ),
            crate::support::mcp::exchange(client, &call),
        );
        let answer = &answers[0];
        let result = &answer["result"];
        let is_error = result["isError"].as_bool();
        let exit_code = match is_error {
            Some(true) => Some(1),
            Some(false) => Some(0),
            None => None,
        };
        let structured = result.get("structuredContent").filter(|v| !v.is_null());
        if let Some(doc) = structured {
            crate::support::schema::check(
                crate::support::mcp::document_of(tool),
                doc,
                &format!("the {tool} tool's structured content ({cell})"),
            );
        }
        let stdout = structured
            .map(|v| serde_json::to_string_pretty(v).unwrap() + "\n")
            .unwrap_or_default();
        // The words are the first block; the second, when there is a
        // document, is that document as JSON (judged here, then as stdout).
        let blocks: Vec<&str> = result["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["text"].as_str())
            .collect();
        let text = blocks.first().copied().unwrap_or_default().to_string();
        let mut problems = Vec::new();
        match (structured, blocks.get(1)) {
            (Some(doc), Some(json)) => {
                if serde_json::from_str::<serde_json::Value>(json)
                    .ok()
                    .as_ref()
                    != Some(doc)
                {
                    problems.push("the JSON text block is not structuredContent".to_string());
                }
            }
            (Some(_), None) => problems.push("no JSON text block beside structuredContent".into()),
            (None, Some(_)) => {
                problems.push("a second text block without structuredContent".into())
            }
            (None, None) => {}
        }
        if blocks.len() > 2 {
            problems.push(format!("{} text blocks, not at most 2", blocks.len()));
        }
        if exit != Exit::Success {
            problems.push(format!(
                "the server exited {exit:?} at the end of input, not 0"
            ));
        }
        if is_error.is_none() {
            problems.push(format!("no tool result: {answer}"));
        }
        problems.extend(setup.fault_missed(&format!("{stdout}{text}")));
        let dump = format!(
            "=== through MCP: {tool} {arguments}\n--- answer\n{}\n--- server's stderr\n{}",
            serde_json::to_string_pretty(answer).unwrap_or_default(),
            sink.stderr()
        );
        let mut seen = Seen {
            exit: exit_code,
            report: Err("no report".into()),
            human: None,
            watch: None,
            lease: None,
            restore: None,
            read_only: None,
            dump,
        };
        if cell.command.leases() {
            problems.extend(setup.lease_touched_outside());
            let run = LeaseRunSeen {
                exit: exit_code,
                stdout,
                stderr: text,
                volumes: setup.volumes(),
                ran: false,
                old_lease: OLD_LEASE.to_string(),
            };
            seen.lease = Some(LeaseSeen {
                json: run.clone(),
                human: run,
                mcp: true,
            });
            return (seen, problems, Removals::default());
        }
        if cell.command.read_only() {
            let mut touched = Vec::new();
            for engine in std::iter::once(&setup.faulty).chain(setup.healthy.as_ref()) {
                let name = engine.name();
                for call in engine.calls() {
                    if call.starts_with("Remove") || call.starts_with("Create") {
                        touched.push(format!("engine {name}: {call}"));
                    }
                }
                let now = engine.world();
                if (now.containers.len(), now.volumes.len(), now.networks.len())
                    != (
                        before.containers.len(),
                        before.volumes.len(),
                        before.networks.len(),
                    )
                {
                    touched.push(format!("engine {name}: the world changed"));
                }
            }
            let run = super::ReadOnlyRunSeen {
                exit: exit_code,
                stdout,
                stderr: text,
            };
            seen.read_only = Some(super::ReadOnlySeen {
                json: run.clone(),
                human: run,
                touched,
                mcp: true,
            });
            return (seen, problems, Removals::default());
        }
        problems.extend(setup.touched_outside());
        problems.extend(setup.healthy_left());
        seen.report = match structured {
            Some(doc) => serde_json::from_value(doc.clone()).map_err(|e| e.to_string()),
            None => Err("no structured content".into()),
        };
        seen.human = Some(text);
        (seen, problems, removals(cell.command))
    }

    async fn once(setup: &Setup, format: &str) -> (Exit, Shared) {
        let config = setup.config(format, &setup.args());
        let mut sink = Shared::default();
        let exit = run_on(
            &config,
            setup.engines(),
            CancellationToken::new(),
            &mut sink,
        )
        .await;
        if format == "json" {
            crate::support::schema::check_stdout(&setup.args(), &sink.stdout());
        }
        (exit, sink)
    }

    /// A running watch: wait for every engine's first cycle, read `/healthz`,
    /// cancel, read the final report. Also says if the fault never happened.
    async fn watch(setup: &Setup) -> (Seen, Option<String>) {
        let config = setup.config("json", &setup.args());
        let sink = Shared::default();
        let cancel = CancellationToken::new();
        let engines: Vec<String> = setup
            .engines()
            .iter()
            .map(|e| e.name().to_string())
            .collect();
        let mut run_sink = sink.clone();
        let run = run_on(&config, setup.engines(), cancel.clone(), &mut run_sink);
        let observe = async {
            let until = Instant::now() + FIRST_CYCLES;
            let mut healthz = None;
            loop {
                let log = super::json_lines(&sink.stderr());
                let addr = log
                    .iter()
                    .find(|l| l["event"] == "started")
                    .and_then(|l| l["metrics"].as_str().map(str::to_string));
                let cycled = |engine: &String| {
                    log.iter().any(|l| {
                        l["engine"] == engine.as_str()
                            && (l["event"] == "cycle" || l["event"] == "cycleFailed")
                    })
                };
                if let Some(addr) = addr.filter(|_| engines.iter().all(cycled)) {
                    healthz = super::http_status(&addr, "/healthz").await;
                    break;
                }
                if Instant::now() > until {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            cancel.cancel();
            healthz
        };
        let (exit, healthz) = tokio::join!(run, observe);
        crate::support::schema::check_stdout(&setup.args(), &sink.stdout());
        let log =
            crate::support::schema::check_lines("watch-line", &sink.stderr(), "the watch log");
        let missed = setup.fault_missed(&(sink.stdout() + &sink.stderr()));
        let seen = Seen {
            exit: Some(exit.code()),
            report: serde_json::from_str(&sink.stdout()).map_err(|e| e.to_string()),
            human: None,
            watch: Some(WatchSeen { log, healthz }),
            lease: None,
            restore: None,
            read_only: None,
            dump: format!(
                "=== watch: exit {}\n--- stdout\n{}--- stderr\n{}",
                exit.code(),
                sink.stdout(),
                sink.stderr()
            ),
        };
        (seen, missed)
    }
}
