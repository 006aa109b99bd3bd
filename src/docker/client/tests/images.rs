//! Hermetic tests of what holds an image and of its removal through the
//! fake runner: golden argv, the parse of docker's image rows, and when a
//! failed `image rm` is a verified refusal.

use super::*;

fn id(c: char) -> ImageId {
    ImageId::parse(&format!("sha256:{}", hex(c))).unwrap()
}

fn row(image: char, parent: Option<char>, tags: &str, digests: &str) -> String {
    let parent = parent.map_or(String::new(), |p| format!("sha256:{}", hex(p)));
    format!(r#"{{"id":"sha256:{}","parent":"{parent}","tags":{tags},"digests":{digests}}}"#, hex(image))
}

const WEB_DIGEST: &str = r#"["127.0.0.1:15000/volce-lab/web@sha256:1111111111111111111111111111111111111111111111111111111111111111"]"#;

fn inspect_one(c: char) -> String {
    format!("image inspect --format {IMAGE_TEMPLATE} -- sha256:{}", hex(c))
}

#[test]
fn remove_image_is_never_forced_and_looks_at_the_image_first() {
    let engine = DockerClient::with_runner(Fake::new(|_| Ok(row('e', None, "[]", WEB_DIGEST))), "/none");
    engine.remove_image(&id('e')).unwrap();
    assert_eq!(
        engine.runner().argv(),
        [inspect_one('e'), format!("image rm --no-prune sha256:{}", hex('e'))]
    );
}

/// Tried: docker says no (exit 1) and the image is then seen with the same
/// id, parent and references: a refusal that changed nothing.
#[test]
fn a_refusal_after_which_the_image_is_unchanged_is_refused() {
    let engine = DockerClient::with_runner(
        Fake::new(|args| {
            if args[0] == "image" && args[1] == "rm" {
                Err(1)
            } else {
                Ok(row('e', Some('d'), "[]", WEB_DIGEST))
            }
        }),
        "/none",
    );
    assert_eq!(engine.remove_image(&id('e')), Err(EngineError::Refused { step: "remove image" }));
    let argv = engine.runner().argv();
    assert_eq!(argv.len(), 3, "{argv:?}");
    assert_eq!(argv[2], inspect_one('e'));
    assert!(EngineError::Refused { step: "remove image" }.changed_nothing());
}

/// Tried: after the failed `rm` the image lost a tag, is gone, or docker's
/// exit code is not its own "no" (125, a signal): none of these is
/// verified, so each stays the call's error (needs_inspection).
#[test]
fn a_refusal_that_cannot_be_verified_stays_an_error() {
    let tagged = r#"["a:1"]"#;
    for (rm_code, after) in [(1, Some("[]")), (1, None), (125, Some(tagged))] {
        let seen = std::sync::atomic::AtomicUsize::new(0);
        let engine = DockerClient::with_runner(
            Fake::new(move |args| {
                if args[1] == "rm" {
                    return Err(rm_code);
                }
                // The first inspect sees one tag; the second what `after` says.
                match (seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst), after) {
                    (0, _) => Ok(row('e', None, tagged, "[]")),
                    (_, Some(tags)) => Ok(row('e', None, tags, "[]")),
                    (_, None) => Err(1),
                }
            }),
            "/none",
        );
        let result = engine.remove_image(&id('e'));
        assert!(
            matches!(result, Err(EngineError::Call { step: "remove image", .. })),
            "{rm_code} {after:?}: {result:?}"
        );
    }
    // An image docker does not know at all: its rm fails, nothing is verified.
    let engine = DockerClient::with_runner(Fake::new(|_| Err(1)), "/none");
    assert!(matches!(engine.remove_image(&id('e')), Err(EngineError::Call { step: "remove image", .. })));
}

#[test]
fn image_holds_lists_every_image_and_counts_children_and_references() {
    let ls = [hex('e'), hex('c'), hex('e'), hex('f'), hex('a')].map(|h| format!("sha256:{h}")).join("\n");
    let rows = [
        row('a', None, "[]", "null"),
        row('c', Some('e'), r#"["mine:1"]"#, "[]"),
        row('e', None, r#"["127.0.0.1:15000/volce-lab/web:1","other/web:latest"]"#, WEB_DIGEST),
        row('f', Some('e'), "null", "null"),
    ]
    .join("\n");
    let engine = DockerClient::with_runner(
        Fake::new(move |args| if args[1] == "ls" { Ok(ls.clone()) } else { Ok(rows.clone()) }),
        "/none",
    );
    let holds = engine.image_holds(&id('e')).unwrap().unwrap();
    assert_eq!(
        holds,
        ImageHolds { children: vec![id('c'), id('f')], tags: 2, digests: 1, references_removable: false }
    );
    let argv = engine.runner().argv();
    assert_eq!(argv[0], "image ls -a -q --no-trunc");
    let ids = [hex('a'), hex('c'), hex('e'), hex('f')].map(|h| format!("sha256:{h}")).join(" ");
    assert_eq!(argv[1], format!("image inspect --format {IMAGE_TEMPLATE} -- {ids}"));
    // A child with one tag of its own is free to go.
    let child = engine.image_holds(&id('c')).unwrap().unwrap();
    assert_eq!(child, ImageHolds { children: vec![], tags: 1, digests: 0, references_removable: true });
    // An image that is not listed is absent, asked with one call.
    let before = engine.runner().argv().len();
    assert_eq!(engine.image_holds(&id('b')).unwrap(), None);
    assert_eq!(engine.runner().argv().len(), before + 1);
}

#[test]
fn repository_of_keeps_a_registry_port_and_drops_tags_and_digests() {
    use super::parse::repository_of;
    assert_eq!(repository_of("127.0.0.1:15000/volce-lab/web:1"), "127.0.0.1:15000/volce-lab/web");
    assert_eq!(repository_of("127.0.0.1:15000/volce-lab/web@sha256:11"), "127.0.0.1:15000/volce-lab/web");
    assert_eq!(repository_of("127.0.0.1:15000/web"), "127.0.0.1:15000/web");
    assert_eq!(repository_of("web:latest"), "web");
}

#[test]
fn image_rows_are_parsed_strictly() {
    use super::parse::parse_image_rows;
    assert!(parse_image_rows(br#"{"id":"sha256:1","parent":"","tags":[],"digests":[]}"#).is_err());
    assert!(parse_image_rows(br#"{"id":"x"}"#).is_err());
    let extra = format!(r#"{{"id":"sha256:{}","parent":"","tags":[],"digests":[],"more":1}}"#, hex('a'));
    assert!(parse_image_rows(extra.as_bytes()).is_err());
    assert_eq!(parse_image_rows(b"").unwrap(), vec![]);
}
