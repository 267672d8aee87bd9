//! The nouns of notifications: which events there are (`NotifyEvent`) and
//! a receiver as a run knows it once its configuration is resolved
//! (`Receiver`: where, with which key, for which events, how far ahead).
//!
//! Owns the events' names (their wire and state-file spelling) and the rule
//! that a key is never shown (`Secret`'s `Debug` says only its length).
//! Must not read the environment, the clock or the network: the state file
//! (`state`) reads the declaration, `cli::config` resolves the key, and the
//! notifier (`observe::notify`) delivers.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One kind of notification.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum NotifyEvent {
    /// A box is due to stop or go within the receiver's `before` (from `watch`).
    Expiring,
    /// A box's containers were stopped and the final listing shows them stopped.
    Stopped,
    /// Every object of a box that the run removed is gone, as the final listing shows.
    Removed,
    /// A box was left with objects that should have gone (its leftovers, with reasons).
    Failed,
}

impl NotifyEvent {
    /// Every event, in the order of the type (the default of `events`).
    pub const ALL: [NotifyEvent; 4] = [
        NotifyEvent::Expiring,
        NotifyEvent::Stopped,
        NotifyEvent::Removed,
        NotifyEvent::Failed,
    ];

    /// Its name, as the state file, the body and `X-Sandboxctl-Event` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::Expiring => "expiring",
            NotifyEvent::Stopped => "stopped",
            NotifyEvent::Removed => "removed",
            NotifyEvent::Failed => "failed",
        }
    }

    /// The event of that name, if there is one.
    pub fn parse(name: &str) -> Option<NotifyEvent> {
        NotifyEvent::ALL.into_iter().find(|e| e.as_str() == name)
    }
}

impl fmt::Display for NotifyEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An HMAC key. Its `Debug` never shows it, so a config printed for a bug
/// report or a panic cannot leak it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Secret {
        Secret(bytes.into())
    }

    /// The key's bytes, for signing only.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

/// One `[[notify]]` receiver, resolved: its key read from its variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receiver {
    /// `https://...`, or `http://` to a loopback address (checked by the state file).
    pub url: String,
    /// The variable the key came from (named in messages, never its value).
    pub secret_env: String,
    pub secret: Secret,
    /// The events it gets (never empty).
    pub events: Vec<NotifyEvent>,
    /// How long before a box is due `expiring` is sent.
    pub before: Duration,
}

impl Receiver {
    /// True when this receiver gets `event`.
    pub fn wants(&self, event: NotifyEvent) -> bool {
        self.events.contains(&event)
    }
}

/// A notification given up on: to whom, what, and why (words of this
/// program, or the receiver's status; the URL is the state file's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFailure {
    pub url: String,
    pub event: NotifyEvent,
    pub engine: String,
    pub box_id: Option<String>,
    pub delivery_id: String,
    pub error: String,
}

/// `before` when the state file gives none.
pub const DEFAULT_BEFORE: Duration = Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_the_key_is_never_shown() {
        for e in NotifyEvent::ALL {
            assert_eq!(NotifyEvent::parse(e.as_str()), Some(e));
            assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
        }
        assert_eq!(NotifyEvent::parse("deleted"), None);
        let shown = format!("{:?}", Secret::new("hunter2"));
        assert_eq!(shown, "Secret(7 bytes)");
    }
}
