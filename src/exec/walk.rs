//! A generic walk over a DAG with bounded concurrency (the shape of
//! Terraform's dag walker): each node runs once everything it depends on has
//! succeeded; what is downstream of a failure is skipped, never run.
//!
//! Owns only the scheduling. Knows nothing of Docker, plans or removals: the
//! caller says what a node does, whether an outcome counts as success, and
//! which ready node to prefer. Must not print.

use std::collections::BTreeSet;
use std::future::Future;

use futures_util::stream::{FuturesUnordered, StreamExt};

/// What became of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Walked<T> {
    /// It ran; the caller's outcome.
    Ran(T),
    /// Not run: the node at this index (a direct or indirect dependency) did not succeed.
    Skipped(usize),
    /// Not run: the walk was cancelled first.
    Cancelled,
}

/// Walks `deps` (for each node, the indices of the nodes it waits for; the
/// graph must be acyclic). At most `limit` nodes run at once; among ready
/// nodes, the smallest `priority` starts first. `ok` says whether an outcome
/// lets dependents run; `on_start`/`on_end` observe. Once `cancelled()` is
/// true, no new node starts; those running finish. Returns one `Walked` per node.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn walk<T, P, F, Fut>(
    deps: &[Vec<usize>],
    limit: usize,
    priority: impl Fn(usize) -> P,
    ok: impl Fn(&T) -> bool,
    cancelled: impl Fn() -> bool,
    mut on_start: impl FnMut(usize),
    mut on_end: impl FnMut(usize, &Walked<T>),
    run: F,
) -> Vec<Walked<T>>
where
    P: Ord + Copy,
    F: Fn(usize) -> Fut,
    Fut: Future<Output = T>,
{
    let n = deps.len();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        for &j in d {
            dependents[j].push(i);
        }
    }
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut done: Vec<Option<Walked<T>>> = (0..n).map(|_| None).collect();
    let mut ready: BTreeSet<(P, usize)> = (0..n)
        .filter(|&i| waiting[i] == 0)
        .map(|i| (priority(i), i))
        .collect();
    let mut running = FuturesUnordered::new();
    let limit = limit.max(1);
    loop {
        while running.len() < limit && !cancelled() {
            let Some((_, i)) = ready.pop_first() else {
                break;
            };
            on_start(i);
            let fut = run(i);
            running.push(async move { (i, fut.await) });
        }
        let Some((i, outcome)) = running.next().await else {
            break;
        };
        let success = ok(&outcome);
        let walked = Walked::Ran(outcome);
        on_end(i, &walked);
        done[i] = Some(walked);
        if success {
            for &d in &dependents[i] {
                waiting[d] -= 1;
                if waiting[d] == 0 && done[d].is_none() {
                    ready.insert((priority(d), d));
                }
            }
        } else {
            // Downstream of a failure is skipped and reported, never run.
            let mut stack: Vec<(usize, usize)> = dependents[i].iter().map(|&d| (d, i)).collect();
            while let Some((d, after)) = stack.pop() {
                if done[d].is_some() {
                    continue;
                }
                ready.remove(&(priority(d), d));
                let skipped = Walked::Skipped(after);
                on_end(d, &skipped);
                done[d] = Some(skipped);
                stack.extend(dependents[d].iter().map(|&dd| (dd, d)));
            }
        }
    }
    done.into_iter()
        .map(|w| w.unwrap_or(Walked::Cancelled))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn run_walk(
        deps: &[Vec<usize>],
        fail: &[usize],
        limit: usize,
    ) -> (Vec<Walked<bool>>, Vec<usize>) {
        let order = Mutex::new(Vec::new());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let out = rt.block_on(walk(
            deps,
            limit,
            |i| i,
            |ok: &bool| *ok,
            || false,
            |_| {},
            |_, _| {},
            |i| {
                order.lock().unwrap().push(i);
                let ok = !fail.contains(&i);
                async move { ok }
            },
        ));
        (out, order.into_inner().unwrap())
    }

    #[test]
    fn runs_in_dependency_order_and_skips_downstream_of_a_failure() {
        // 0 -> 2, 1 -> 2, 2 -> 3; 4 independent.
        let deps = vec![vec![], vec![], vec![0, 1], vec![2], vec![]];
        let (out, order) = run_walk(&deps, &[], 1);
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
        assert!(out.iter().all(|w| *w == Walked::Ran(true)));
        let (out, order) = run_walk(&deps, &[1], 4);
        assert_eq!(out[2], Walked::Skipped(1));
        assert_eq!(out[3], Walked::Skipped(2));
        assert_eq!(out[4], Walked::Ran(true));
        assert!(!order.contains(&2) && !order.contains(&3));
    }

    #[test]
    fn cancelled_walk_starts_nothing() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let out = rt.block_on(walk(
            &[vec![], vec![0]],
            2,
            |i| i,
            |_: &()| true,
            || true,
            |_| {},
            |_, _| {},
            |_| async {},
        ));
        assert_eq!(out, vec![Walked::Cancelled, Walked::Cancelled]);
    }
}
