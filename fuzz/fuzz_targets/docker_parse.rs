//! Fuzz target: the parsers of what the docker CLI prints
//! (`volce_lab::docker::client::parse`), which run as root on docker's stdout.
//! The first byte picks the parser (image rows are also folded into holds). None may panic; what they accept is
//! only well-formed ids, and only our labels and network names.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volce_lab::docker::client::parse;

fuzz_target!(|data: &[u8]| {
    let Some((&which, out)) = data.split_first() else { return };
    match which % 5 {
        0 => {
            if let Ok(ids) = parse::parse_container_ids(out) {
                assert!(ids.iter().all(|id| id.as_str().len() == 64));
            }
        }
        1 => {
            if let Ok(containers) = parse::parse_inspect_rows(out) {
                for container in containers {
                    assert!(container.labels.keys().all(|k| k.starts_with("io.volce-lab.")));
                }
            }
        }
        2 => {
            let _ = parse::parse_images(out);
        }
        3 => {
            // An image's holds count what it finds; any image row parses to a full id.
            if let Ok(rows) = parse::parse_image_rows(out) {
                for row in &rows {
                    let holds = parse::holds_of(&row.id, &rows).expect("its own row is found");
                    let first = rows.iter().find(|r| r.id == row.id).unwrap();
                    assert_eq!((holds.tags, holds.digests), (first.tags.len(), first.digests.len()));
                    assert!(holds.children.iter().all(|c| {
                        rows.iter().any(|r| &r.id == c && r.parent.as_ref() == Some(&row.id))
                    }));
                }
            }
        }
        _ => {
            if let Ok(networks) = parse::parse_networks(out) {
                assert!(networks.iter().all(|n| n.starts_with(volce_lab::vocab::NAME_PREFIX)));
            }
        }
    }
});
