//! Notifications (`[[notify]]`) against the real engine, each test in its
//! own scope (`Sandbox`), with a receiver the test starts on 127.0.0.1
//! (`support::receiver`): a leaked box removed by `apply` is told
//! `removed`, its body matching the committed schema and its signature
//! checked with the key; a receiver that answers 500, is down, or hangs
//! changes nothing in the teardown: it converges, exit 0, and the delivery
//! given up on is a warning on stderr. A hanging receiver is timed only
//! against a generous bound that proves "does not hang".

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::support::assert::assert_box_gone;
use crate::support::docker::{Run, Sandbox};
use crate::support::receiver::{Answer, Receiver};
use crate::support::schema::check;

/// The variable the tests' receivers read their key from, and the key.
const SECRET_ENV: &str = "SBX_TEST_NOTIFY_SECRET";
const SECRET: &str = "a test key, not a secret";

/// The state file: the sandbox's scope and one receiver at `url`.
fn state(sbx: &Sandbox, url: &str) -> String {
    format!(
        "{}\n[[notify]]\nurl = \"{url}\"\nsecret_env = \"{SECRET_ENV}\"\n",
        sbx.scope_toml()
    )
}

/// `sha256=` and the hex HMAC-SHA256 of `body` under the test's key.
fn signature(body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

trial!(a_leaked_box_removed_by_apply_is_told_removed_signed_with_the_key);
/// `apply` removes a leaked box; the receiver gets one `removed` for it:
/// `POST`, its headers, the body matching docs/schema/notify.schema.json,
/// naming the box's container and volume with their reasons, and its
/// signature the HMAC-SHA256 of the body under the key.
async fn a_leaked_box_removed_by_apply_is_told_removed_signed_with_the_key() {
    let sbx = Sandbox::new("notify-removed").await;
    let b = sbx.add_box("gone", Run::Running).await;
    let receiver = Receiver::start(Answer::Ok);
    let cli = sbx
        .cli()
        .state_toml(&state(&sbx, &receiver.url()))
        .env(SECRET_ENV, SECRET);
    let out = cli.run_with(["apply"]);
    out.success();
    assert_box_gone(&sbx, &b, &out.dump()).await;
    assert!(!out.stderr.contains("not delivered"), "{}", out.dump());
    assert!(!out.stderr.contains(SECRET) && !out.stdout.contains(SECRET));
    // The run waits for its deliveries (up to its bound) before it exits.
    let got = receiver.got();
    assert_eq!(got.len(), 1, "{got:?}\n{}", out.dump());
    let n = &got[0];
    assert_eq!((n.method.as_str(), n.path.as_str()), ("POST", "/hook"));
    assert_eq!(n.header("content-type"), Some("application/json"));
    assert_eq!(n.header("x-sandboxctl-event"), Some("removed"));
    assert_eq!(
        n.header("x-sandboxctl-signature-256"),
        Some(signature(&n.body).as_str()),
        "the signature is the HMAC-SHA256 of the body under the key"
    );
    let body = n.json();
    check("notify", &body, "a removed notification");
    assert_eq!(body["event"], "removed");
    assert_eq!(body["box"], "gone");
    assert_eq!(body["engine"], "default");
    assert_eq!(
        n.header("x-sandboxctl-delivery"),
        body["deliveryId"].as_str()
    );
    let mut objects: Vec<(String, String, String)> = body["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap().to_string(),
                o["name"].as_str().unwrap().to_string(),
                o["reason"]["code"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    objects.sort();
    assert_eq!(
        objects,
        [
            (
                "container".to_string(),
                b.container.name.clone(),
                "boxNotDeclared".to_string()
            ),
            (
                "volume".to_string(),
                b.volume.clone(),
                "boxNotDeclared".to_string()
            ),
        ],
        "{body:#}"
    );
}

trial!(a_receiver_that_answers_500_is_down_or_hangs_changes_nothing_in_the_teardown);
/// For a receiver that answers 500, one where nothing listens and one
/// that never answers: `apply` removes the leaked box, converges and exits
/// 0; the notification given up on is a warning on stderr naming the
/// receiver and saying the teardown is not affected. The hanging receiver
/// costs the command at most the notifier's bound after its report (timed
/// against a generous bound only).
async fn a_receiver_that_answers_500_is_down_or_hangs_changes_nothing_in_the_teardown() {
    let sbx = Sandbox::new("notify-faults").await;
    let failing = Receiver::start(Answer::Error);
    let hanging = Receiver::start(Answer::Hang);
    for (name, url) in [
        ("error", failing.url()),
        ("down", Receiver::down_url()),
        ("hang", hanging.url()),
    ] {
        let b = sbx.add_box(name, Run::Running).await;
        let cli = sbx
            .cli()
            .state_toml(&state(&sbx, &url))
            .env(SECRET_ENV, SECRET);
        let out = cli.run_with(["apply", "--format", "json"]);
        out.success();
        let report = out.json();
        assert_eq!(report["converged"], true, "{name}\n{}", out.dump());
        assert_box_gone(&sbx, &b, &out.dump()).await;
        assert!(
            out.stderr.contains("warning: notification removed of box")
                && out.stderr.contains(&url)
                && out.stderr.contains("the teardown is not affected"),
            "{name}: the delivery given up on is said\n{}",
            out.dump()
        );
        assert!(
            out.elapsed < Duration::from_secs(60),
            "{name}: the run hung ({:?})\n{}",
            out.elapsed,
            out.dump()
        );
    }
    // The 500 receiver was tried more than once (with backoff), with one
    // delivery ID and one body.
    let got = failing.got();
    assert!(got.len() >= 2, "tried again: {got:?}");
    assert!(got.windows(2).all(|w| w[0].body == w[1].body
        && w[0].header("x-sandboxctl-delivery") == w[1].header("x-sandboxctl-delivery")));
    assert!(
        !hanging.got().is_empty(),
        "the hanging receiver got the request"
    );
}

trial!(a_teardown_that_leaves_a_volume_is_told_failed_naming_it);
/// The engine refuses a box's volume removal (500, through the fault
/// proxy): `apply` exits 1, and the receiver gets `failed` for that box,
/// naming the volume left with its reason (`removalFailed`) and the
/// container that went; the other box is told `removed`. Signed, and
/// matching the schema.
async fn a_teardown_that_leaves_a_volume_is_told_failed_naming_it() {
    let sbx = Sandbox::new("notify-failed").await;
    let (a, b) = tokio::join!(
        sbx.add_box("whole", Run::Exited),
        sbx.add_box("stuck", Run::Exited)
    );
    let proxy = crate::support::proxy::Proxy::start();
    proxy
        .on("DELETE", &format!("/volumes/{}", b.volume))
        .respond(500, "volume driver unavailable");
    let receiver = Receiver::start(Answer::Ok);
    let cli = crate::support::cli::Cli::new()
        .docker_host(&proxy.docker_host())
        .state_toml(&state(&sbx, &receiver.url()))
        .env(SECRET_ENV, SECRET)
        .deadline(Duration::from_secs(60));
    let out = cli.run_with(["apply"]);
    out.expect_code(1);
    assert_box_gone(&sbx, &a, &out.dump()).await;
    let mut got = receiver.got();
    got.sort_by_key(|g| g.json()["box"].as_str().unwrap_or_default().to_string());
    let events: Vec<(String, String)> = got
        .iter()
        .map(|g| {
            let body = g.json();
            check("notify", &body, "a failed run's notification");
            assert_eq!(
                g.header("x-sandboxctl-signature-256"),
                Some(signature(&g.body).as_str())
            );
            (
                body["box"].as_str().unwrap().to_string(),
                body["event"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("stuck".to_string(), "failed".to_string()),
            ("whole".to_string(), "removed".to_string())
        ],
        "{}",
        out.dump()
    );
    let failed = got[0].json();
    assert_eq!(
        failed["leftovers"].as_array().unwrap().len(),
        1,
        "{failed:#}"
    );
    assert_eq!(failed["leftovers"][0]["kind"], "volume");
    assert_eq!(failed["leftovers"][0]["name"], b.volume.as_str());
    assert_eq!(failed["leftovers"][0]["reason"]["code"], "removalFailed");
    assert_eq!(failed["objects"][0]["name"], b.container.name.as_str());
}

trial!(watch_tells_expiring_once_before_a_box_is_due);
/// `watch --once` with a grace of an hour and `before = "2h"`: a leaked
/// box within its grace is due at the grace's end, within `before`, so the
/// receiver gets one `expiring` naming it with `removeAt`; nothing is
/// removed. A second watch sends it again with the same delivery ID (at
/// least once; the receiver dedupes by it).
async fn watch_tells_expiring_once_before_a_box_is_due() {
    let sbx = Sandbox::new("notify-expiring").await;
    let b = sbx.add_box("young", Run::Running).await;
    let receiver = Receiver::start(Answer::Ok);
    let toml = format!(
        "{}before = \"2h\"\nevents = [\"expiring\"]\n",
        state(&sbx, &receiver.url())
    );
    let cli = sbx.cli().state_toml(&toml).env(SECRET_ENV, SECRET);
    let out = cli.run_with(["watch", "--once", "--grace", "1h"]);
    out.success();
    assert_eq!(
        sbx.container_state(&b.container.id).await.as_deref(),
        Some("running")
    );
    let got = receiver.got();
    assert_eq!(got.len(), 1, "{got:?}\n{}", out.dump());
    let body = got[0].json();
    check("notify", &body, "an expiring notification");
    assert_eq!(body["event"], "expiring");
    assert_eq!(body["box"], "young");
    assert!(body["removeAt"].is_string(), "{body:#}");
    assert_eq!(body["objects"][0]["reason"]["code"], "withinGrace");
    let out = cli.run_with(["watch", "--once", "--grace", "1h"]);
    out.success();
    let again = receiver.got();
    assert_eq!(again.len(), 2, "{}", out.dump());
    assert_eq!(again[1].json()["deliveryId"], body["deliveryId"]);
}
