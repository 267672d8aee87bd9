//! Bollard's wire models as `model::Object`s: containers (from a listing
//! or an inspect, with their volumes, networks and namespace joins), volumes,
//! networks, images, services, configs, secrets and events, the sizes of
//! `GET /system/df` (API 1.41's shape, read here: bollard's model is
//! another's), and the engine's RFC 3339 timestamps as Unix time.
//!
//! Pure conversions of what the engine answered. Must not make requests,
//! read the clock, or drop objects (filtering is the engine's, by the
//! request's filters, and policy is `plan`'s).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bollard::models::{
    ContainerInspectResponse, ContainerSummary, ImageSummary, MountPoint, Network, Volume,
};
use time::format_description::well_known::Rfc3339;

use crate::engine::{DiskUsage, Event};
use crate::model::{ImageInfo, Join, Kind, Labels, Namespace, Object, ObjectKey};

/// The image tag Docker reports for an untagged image; never a real tag.
const NONE_TAG: &str = "<none>:<none>";

/// A service as an object: its spec's name and labels, and what its tasks
/// use: the networks (by ID, as the engine stores them; a name is resolved
/// by the inventory), the named volumes they mount, configs and secrets.
pub(super) fn service_from(engine: &str, s: bollard::models::Service) -> Object {
    let spec = s.spec.unwrap_or_default();
    let mut o = named_object(
        engine,
        Kind::Service,
        s.id,
        spec.name.clone(),
        spec.labels.clone(),
        s.created_at,
    );
    let task = spec.task_template.unwrap_or_default();
    let networks = listed(task.networks, |n| n.target)
        .chain(listed(spec.networks, |n| n.target))
        .chain(listed(s.endpoint.and_then(|e| e.virtual_ips), |v| {
            v.network_id
        }));
    let container = task.container_spec.unwrap_or_default();
    // The named volumes its tasks mount (made on each node a task runs on).
    let volumes = listed(container.mounts.clone(), |m| match m.typ {
        Some(bollard::models::MountType::VOLUME) => m.source.filter(|s| !s.is_empty()),
        _ => None,
    });
    let key = |kind| move |id: String| ObjectKey::new(engine, kind, &id);
    o.depends_on = networks
        .map(key(Kind::Network))
        .chain(volumes.map(key(Kind::Volume)))
        .chain(listed(container.configs, |c| c.config_id).map(key(Kind::Config)))
        .chain(listed(container.secrets, |s| s.secret_id).map(key(Kind::Secret)))
        .collect();
    o.depends_on.sort();
    o.depends_on.dedup();
    o.image = container.image;
    o
}

/// What `id` takes from each of a spec's `items` (none when there is no
/// list), skipping the items it finds nothing in.
fn listed<T>(
    items: Option<Vec<T>>,
    id: impl FnMut(T) -> Option<String>,
) -> impl Iterator<Item = String> {
    items.unwrap_or_default().into_iter().filter_map(id)
}

/// A network, service, config or secret: its ID, name (a swarm object's
/// spec's), labels and creation time.
pub(super) fn named_object(
    engine: &str,
    kind: Kind,
    id: Option<String>,
    name: Option<String>,
    labels: Option<HashMap<String, String>>,
    created: Option<String>,
) -> Object {
    let mut o = Object::new(
        engine,
        kind,
        id.as_deref().unwrap_or_default(),
        name.as_deref().unwrap_or_default(),
    );
    o.labels = labels_from(labels);
    o.created = created.as_deref().and_then(parse_time);
    o
}

pub(super) fn event_from(m: bollard::models::EventMessage) -> Event {
    use bollard::models::EventMessageTypeEnum as T;
    Event {
        kind: match m.typ {
            Some(T::CONTAINER) => Some(Kind::Container),
            Some(T::VOLUME) => Some(Kind::Volume),
            Some(T::NETWORK) => Some(Kind::Network),
            Some(T::SERVICE) => Some(Kind::Service),
            Some(T::CONFIG) => Some(Kind::Config),
            Some(T::SECRET) => Some(Kind::Secret),
            _ => None,
        },
        action: m.action.unwrap_or_default(),
        id: m.actor.and_then(|a| a.id).unwrap_or_default(),
    }
}

pub(super) fn labels_from(labels: Option<HashMap<String, String>>) -> Labels {
    labels.unwrap_or_default().into_iter().collect()
}

/// Parses an engine timestamp (RFC 3339, UTC or with an offset, any fraction)
/// into Unix seconds.
pub(crate) fn parse_time(text: &str) -> Option<i64> {
    parse_time_ms(text).map(|ms| ms.div_euclid(1000))
}

/// Parses an engine timestamp (RFC 3339, UTC or with an offset, any fraction)
/// into Unix milliseconds (the fraction cut to whole milliseconds). None for
/// Docker's zero time (`0001-01-01T00:00:00Z`, Go's empty time), for a time
/// before 1970, and for anything that is not RFC 3339 with `T` or a space
/// between date and time and an upper-case `Z` (as engines write it; the
/// crate would also take a lower-case `t`/`z` or any separator byte). A leap
/// second (`23:59:60` at the end of a month, UTC) is the last instant of its
/// minute, `23:59:59.999`; elsewhere it is refused.
pub(crate) fn parse_time_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    if text.starts_with("0001-01-01")
        || !matches!(text.as_bytes().get(10), Some(b'T' | b' '))
        || text.ends_with('z')
    {
        return None;
    }
    let t = time::OffsetDateTime::parse(text, &Rfc3339).ok()?;
    let ms = i64::try_from(t.unix_timestamp_nanos().div_euclid(1_000_000)).ok()?;
    (ms >= 0).then_some(ms)
}

/// The mounts of type `volume` (named volumes; bind mounts and tmpfs are not
/// volumes): each name with its first destination (sorted), empty if none.
fn volume_mounts(mounts: Option<Vec<MountPoint>>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::<String, String>::new();
    for m in mounts.unwrap_or_default() {
        if m.typ.as_deref() != Some("volume") {
            continue;
        }
        let Some(name) = m.name.filter(|n| !n.is_empty()) else {
            continue;
        };
        let path = m.destination.unwrap_or_default();
        let entry = out.entry(name).or_insert_with(|| path.clone());
        if entry.is_empty() || (!path.is_empty() && path < *entry) {
            *entry = path;
        }
    }
    out
}

/// The container's own name: Docker lists `/name` (and `/other/alias` for links).
fn container_name(names: &[String]) -> String {
    let pick = names
        .iter()
        .find(|n| !n.trim_start_matches('/').contains('/'))
        .or_else(|| names.first());
    pick.map(|n| n.trim_start_matches('/').to_string())
        .unwrap_or_default()
}

/// A container's attachments, each as the network's ID, or its name when the
/// engine has not assigned an endpoint yet (a created, never started
/// container); the inventory resolves names to IDs.
fn network_refs(
    networks: Option<HashMap<String, bollard::models::EndpointSettings>>,
) -> BTreeSet<String> {
    networks
        .unwrap_or_default()
        .into_iter()
        .map(|(name, endpoint)| {
            endpoint
                .network_id
                .filter(|id| !id.is_empty())
                .unwrap_or(name)
        })
        .collect()
}

/// `container:<target>` as a join of `namespace`.
fn join_of(namespace: Namespace, mode: Option<&str>) -> Option<Join> {
    let target = mode?.strip_prefix("container:")?;
    (!target.is_empty()).then(|| Join {
        namespace,
        target: target.to_string(),
    })
}

/// A container object: depends on its named volumes and its networks (by ID).
#[allow(clippy::too_many_arguments)]
fn container_object(
    engine: &str,
    id: String,
    name: String,
    state: String,
    labels: Labels,
    created: Option<i64>,
    image: Option<String>,
    volumes: BTreeMap<String, String>,
    networks: BTreeSet<String>,
    joins: Vec<Join>,
) -> Object {
    let mut o = Object::new(engine, Kind::Container, &id, &name);
    o.state = Some(state);
    o.labels = labels;
    o.created = created;
    o.image = image;
    o.depends_on = volumes
        .keys()
        .map(|v| ObjectKey::new(engine, Kind::Volume, v))
        .chain(
            networks
                .iter()
                .map(|n| ObjectKey::new(engine, Kind::Network, n)),
        )
        .collect();
    o.depends_on.sort();
    o.joins = joins;
    o.joins.sort();
    o.mounts = volumes.into_iter().filter(|(_, p)| !p.is_empty()).collect();
    o
}

pub(super) fn container_from_summary(engine: &str, c: ContainerSummary) -> Object {
    let networks = network_refs(c.network_settings.and_then(|n| n.networks));
    let network_mode = c.host_config.and_then(|h| h.network_mode);
    container_object(
        engine,
        c.id.unwrap_or_default(),
        container_name(&c.names.unwrap_or_default()),
        c.state
            .map(|s| s.to_string().to_lowercase())
            .unwrap_or_default(),
        labels_from(c.labels),
        c.created,
        c.image,
        volume_mounts(c.mounts),
        networks,
        join_of(Namespace::Network, network_mode.as_deref())
            .into_iter()
            .collect(),
    )
}

pub(super) fn container_from_inspect(engine: &str, c: ContainerInspectResponse) -> Object {
    let networks = network_refs(c.network_settings.and_then(|n| n.networks));
    let host = c.host_config.unwrap_or_default();
    let ipc_shareable = host.ipc_mode.as_deref() == Some("shareable");
    let joins = [
        join_of(Namespace::Network, host.network_mode.as_deref()),
        join_of(Namespace::Pid, host.pid_mode.as_deref()),
        join_of(Namespace::Ipc, host.ipc_mode.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut o = container_object(
        engine,
        c.id.unwrap_or_default(),
        container_name(&c.name.into_iter().collect::<Vec<_>>()),
        c.state
            .and_then(|s| s.status)
            .map(|s| s.to_string().to_lowercase())
            .unwrap_or_default(),
        labels_from(c.config.as_ref().and_then(|cfg| cfg.labels.clone())),
        c.created.as_deref().and_then(parse_time),
        c.config.and_then(|cfg| cfg.image),
        volume_mounts(c.mounts),
        networks,
        joins,
    );
    o.ipc_shareable = Some(ipc_shareable);
    o
}

pub(super) fn volume_from(engine: &str, v: Volume) -> Object {
    let mut o = Object::new(engine, Kind::Volume, &v.name, &v.name);
    o.labels = v.labels.into_iter().collect();
    o.created = v.created_at.as_deref().and_then(parse_time);
    o
}

pub(super) fn network_from(engine: &str, n: Network) -> Object {
    named_object(engine, Kind::Network, n.id, n.name, n.labels, n.created)
}

pub(super) fn config_from(engine: &str, c: bollard::models::Config) -> Object {
    let spec = c.spec.unwrap_or_default();
    named_object(
        engine,
        Kind::Config,
        c.id,
        spec.name,
        spec.labels,
        c.created_at,
    )
}

pub(super) fn secret_from(engine: &str, s: bollard::models::Secret) -> Object {
    let spec = s.spec.unwrap_or_default();
    named_object(
        engine,
        Kind::Secret,
        s.id,
        spec.name,
        spec.labels,
        s.created_at,
    )
}

pub(super) fn image_from(i: ImageSummary) -> ImageInfo {
    let mut tags: Vec<String> = i.repo_tags.into_iter().filter(|t| t != NONE_TAG).collect();
    tags.sort();
    tags.dedup();
    ImageInfo { id: i.id, tags }
}

/// `GET /system/df` as API 1.41 to 1.51 shape it (Docker 20.10, 26.1;
/// Podman's compatible API): the members read here, the rest ignored.
#[derive(serde::Deserialize)]
struct DiskUsageAnswer {
    #[serde(rename = "Containers", default)]
    containers: Option<Vec<ContainerUsage>>,
    #[serde(rename = "Volumes", default)]
    volumes: Option<Vec<VolumeUsage>>,
}

#[derive(serde::Deserialize)]
struct ContainerUsage {
    #[serde(rename = "Id")]
    id: String,
    #[serde(rename = "SizeRw", default)]
    size_rw: Option<i64>,
    /// Present when the engine measured the container (Go omits a zero
    /// `SizeRw` but not the root size of an image with content).
    #[serde(rename = "SizeRootFs", default)]
    size_root_fs: Option<i64>,
}

#[derive(serde::Deserialize)]
struct VolumeUsage {
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "UsageData", default)]
    usage: Option<VolumeUsageData>,
}

#[derive(serde::Deserialize)]
struct VolumeUsageData {
    #[serde(rename = "Size")]
    size: i64,
}

/// The sizes a `/system/df` answer gives, by key on `engine`: each
/// container's `SizeRw`, each volume's `UsageData.Size`; a negative one
/// (Docker's -1, "not available") or a missing one is left out. An answer
/// that is not JSON of that shape is an error.
pub(super) fn disk_usage_from(engine: &str, body: &[u8]) -> Result<DiskUsage, String> {
    let answer: DiskUsageAnswer = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let mut sizes = BTreeMap::new();
    for c in answer.containers.unwrap_or_default() {
        // The engine omits a zero `SizeRw` (Go's `omitempty`): Docker 20.10
        // answers a created, never started container with `SizeRootFs` and
        // no `SizeRw`. A container it lists with a root size measured is
        // measured, its layer 0 B when `SizeRw` is absent; a negative
        // figure, or neither size, is not measured (decision 0026).
        let size = match (c.size_rw, c.size_root_fs) {
            (Some(rw), _) => u64::try_from(rw).ok(),
            (None, Some(root)) if root >= 0 => Some(0),
            (None, _) => None,
        };
        if let Some(size) = size {
            sizes.insert(ObjectKey::new(engine, Kind::Container, &c.id), size);
        }
    }
    for v in answer.volumes.unwrap_or_default() {
        if let Some(size) = v.usage.and_then(|u| u64::try_from(u.size).ok()) {
            sizes.insert(ObjectKey::new(engine, Kind::Volume, &v.name), size);
        }
    }
    Ok(DiskUsage(sizes))
}

/// The `message` of an engine's error answer (`{"message": "..."}`), or
/// its first 200 bytes as text.
pub(super) fn message_of(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Message {
        message: String,
    }
    match serde_json::from_slice::<Message>(body) {
        Ok(m) => m.message,
        Err(_) => String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_usage_reads_api_1_41_and_leaves_out_what_was_not_measured() {
        let body = br#"{"LayersSize": 1, "Images": [],
            "Containers": [{"Id": "c1", "SizeRw": 4194304}, {"Id": "c2", "SizeRw": -1}, {"Id": "c3"},
                           {"Id": "c4", "SizeRootFs": 3}, {"Id": "c5", "SizeRw": -1, "SizeRootFs": 3}],
            "Volumes": [{"Name": "v1", "UsageData": {"Size": 3145728, "RefCount": 1}},
                        {"Name": "v2", "UsageData": {"Size": -1, "RefCount": -1}}, {"Name": "v3"}],
            "BuildCache": null}"#;
        let sizes = disk_usage_from("e", body).unwrap();
        let key = |kind, id| ObjectKey::new("e", kind, id);
        assert_eq!(
            sizes.0,
            BTreeMap::from([
                (key(Kind::Container, "c1"), 4194304),
                // Created, never started (Docker 20.10): no SizeRw, a root size.
                (key(Kind::Container, "c4"), 0),
                (key(Kind::Volume, "v1"), 3145728),
            ])
        );
        assert_eq!(disk_usage_from("e", b"{}").unwrap(), DiskUsage::default());
        assert!(disk_usage_from("e", b"<html>").is_err());
        assert_eq!(
            message_of(br#"{"message":"a disk usage operation is already running"}"#),
            "a disk usage operation is already running"
        );
        assert_eq!(message_of(b"oops"), "oops");
    }
    use bollard::models::{
        ContainerConfig, ContainerState, ContainerStateStatusEnum, ContainerSummaryHostConfig,
        ContainerSummaryStateEnum, HostConfig,
    };

    #[test]
    fn parses_engine_times() {
        assert_eq!(parse_time("1970-01-01T00:01:00Z"), Some(60));
        assert_eq!(parse_time("1970-01-01T00:01:00.123456789Z"), Some(60));
        assert_eq!(parse_time("1970-01-01T01:01:00+01:00"), Some(60));
        assert_eq!(parse_time("0001-01-01T00:00:00Z"), None);
        assert_eq!(parse_time(""), None);
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn parses_engine_times_as_the_former_parser_did() {
        // A space for the `T`, surrounding white space, any number of digits
        // (cut to whole milliseconds), `+00:00` and `-00:00` for `Z`.
        assert_eq!(parse_time("1970-01-01 00:01:00Z"), Some(60));
        assert_eq!(parse_time(" 2024-01-01T00:00:00Z\n"), Some(1_704_067_200));
        assert_eq!(parse_time_ms("1970-01-01T00:00:01.999999999Z"), Some(1999));
        assert_eq!(
            parse_time_ms("1970-01-01T00:01:00.1234567891Z"),
            Some(60_123)
        );
        assert_eq!(parse_time("1970-01-01T00:01:00+00:00"), Some(60));
        assert_eq!(parse_time("1970-01-01T00:01:00-00:00"), Some(60));
        assert_eq!(
            parse_time_ms("2024-02-29T23:30:00.5-05:30"),
            Some(1_709_269_200_500)
        );
        assert_eq!(parse_time("9999-12-31T23:59:59Z"), Some(253_402_300_799));
        // Lower case, other separators, no zone, bad dates and offsets: none.
        for bad in [
            "1970-01-01t00:01:00Z",
            "1970-01-01T00:01:00z",
            "1970-01-01x00:01:00Z",
            "1970-01-01T00:01:00",
            "1970-01-01T00:01:00+0100",
            "1970-01-01T00:01:00 +01:00",
            "2023-02-29T00:00:00Z",
            "2016-12-31T23:59:61Z",
            "0001-01-01T00:00:00+00:00",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn parses_engine_times_with_an_offset_and_a_fraction() {
        // Podman writes local times with nanoseconds: the offset counts (the
        // former parser dropped a `+hh:mm` offset after a fraction).
        assert_eq!(
            parse_time_ms("2024-06-01T12:00:00.000000000+02:00"),
            Some(1_717_236_000_000)
        );
        assert_eq!(parse_time_ms("1970-01-01T01:01:00.5+01:00"), Some(60_500));
    }

    #[test]
    fn a_leap_second_is_the_last_instant_of_its_minute() {
        assert_eq!(parse_time("2016-12-31T23:59:60Z"), Some(1_483_228_799));
        assert_eq!(parse_time("2016-12-31T18:59:60-05:00"), Some(1_483_228_799));
        assert_eq!(
            parse_time_ms("2016-12-31T23:59:60Z"),
            Some(1_483_228_799_999)
        );
        // Not at the end of a month (UTC): no leap second was ever there.
        assert_eq!(parse_time("2020-05-05T12:00:60Z"), None);
    }

    fn mount(typ: &str, name: Option<&str>) -> MountPoint {
        MountPoint {
            typ: Some(typ.to_string()),
            name: name.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn converts_container_summary() {
        let c = ContainerSummary {
            id: Some("f".repeat(64)),
            names: Some(vec!["/web/db".into(), "/db".into()]),
            state: Some(ContainerSummaryStateEnum::RUNNING),
            labels: Some(HashMap::from([("ca.sandbox".to_string(), "1".to_string())])),
            mounts: Some(vec![
                mount("volume", Some("data")),
                mount("bind", None),
                mount("tmpfs", None),
                mount("volume", Some("cache")),
            ]),
            host_config: Some(ContainerSummaryHostConfig {
                network_mode: Some("container:abc".into()),
                ..Default::default()
            }),
            created: Some(42),
            ..Default::default()
        };
        let info = container_from_summary("default", c);
        assert_eq!(info.name, "db");
        assert_eq!(info.state.as_deref(), Some("running"));
        assert_eq!(info.created, Some(42));
        assert_eq!(info.labels.get("ca.sandbox").unwrap(), "1");
        let deps: Vec<String> = info.depends_on.iter().map(ToString::to_string).collect();
        assert_eq!(deps, vec!["volume/cache", "volume/data"]);
        assert_eq!(
            info.joins,
            vec![Join {
                namespace: Namespace::Network,
                target: "abc".into()
            }]
        );
        let bare = container_from_summary("default", ContainerSummary::default());
        assert_eq!(bare.name, "");
        assert!(bare.labels.is_empty() && bare.depends_on.is_empty());
    }

    #[test]
    fn converts_container_inspect_with_its_pid_and_ipc_joins() {
        let c = ContainerInspectResponse {
            id: Some("abc".into()),
            name: Some("/box-1".into()),
            state: Some(ContainerState {
                status: Some(ContainerStateStatusEnum::EXITED),
                ..Default::default()
            }),
            config: Some(ContainerConfig {
                labels: Some(HashMap::from([(
                    "ca.sandbox.id".to_string(),
                    "b".to_string(),
                )])),
                ..Default::default()
            }),
            host_config: Some(HostConfig {
                pid_mode: Some("container:t1".into()),
                ipc_mode: Some("private".into()),
                network_mode: Some("bridge".into()),
                ..Default::default()
            }),
            mounts: Some(vec![mount("volume", Some("v1")), mount("bind", None)]),
            ..Default::default()
        };
        let info = container_from_inspect("default", c);
        assert_eq!(info.name, "box-1");
        assert_eq!(info.state.as_deref(), Some("exited"));
        assert_eq!(info.box_id(), Some("b"));
        assert_eq!(
            info.joins,
            vec![Join {
                namespace: Namespace::Pid,
                target: "t1".into()
            }]
        );
    }

    #[test]
    fn converts_images_volumes_and_networks() {
        let i = ImageSummary {
            id: "sha256:1".into(),
            repo_tags: vec!["ca-sbx:z".into(), "<none>:<none>".into(), "ca-sbx:a".into()],
            ..Default::default()
        };
        assert_eq!(
            image_from(i),
            ImageInfo {
                id: "sha256:1".into(),
                tags: vec!["ca-sbx:a".into(), "ca-sbx:z".into()]
            }
        );
        let v = Volume {
            name: "v".into(),
            created_at: Some("1970-01-01T00:00:10Z".into()),
            labels: HashMap::from([("k".to_string(), "v".to_string())]),
            ..Default::default()
        };
        let info = volume_from("default", v);
        assert_eq!(info.created, Some(10));
        assert_eq!(info.key.id, "v");
        let n = Network {
            id: Some("n1".into()),
            name: Some("sbx-net".into()),
            created: Some("1970-01-01T00:00:20.5Z".into()),
            ..Default::default()
        };
        let info = network_from("default", n);
        assert_eq!(
            (info.key.id.as_str(), info.name.as_str()),
            ("n1", "sbx-net")
        );
        assert_eq!(info.created, Some(20));
    }
}
