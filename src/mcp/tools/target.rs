//! Which configured target a call is about: the `target` argument every
//! tool takes and the `targets` fan-out of `cloud_check`. Pure; runs
//! unprivileged inside `volce-lab mcp-serve`.
//!
//! Invariants enforced here:
//! - a call acts on exactly the targets it names: `target` may be left out
//!   only when one target is configured, and nothing defaults to "the first";
//! - only `cloud_check` fans out (read-only); every changing tool, and the
//!   reads whose answers feed a plan, act on one target;
//! - the selection is taken out of the arguments before the tool's own
//!   validation, which therefore never sees (or echoes) it.

use serde_json::{Map, Value, json};

use super::ToolName;
use super::validate::shown;
use crate::vocab::{Code, Refusal};
use crate::wire::rollout::MAX_ROLLOUT_HOSTS;

/// The names and groups a call may choose from, in fleet order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Choices {
    pub names: Vec<String>,
    /// (group, the indexes of its targets in `names`).
    pub groups: Vec<(String, Vec<usize>)>,
}

/// The targets a validated call acts on, as indexes into [`Choices::names`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    One(usize),
    /// `cloud_check` with `targets`: each target once, in fleet order.
    FanOut(Vec<usize>),
    /// `service_plan` with `targets`: a rollout over these targets, in the
    /// order the call named them (issue 43; never an implicit "all").
    Fleet(Vec<usize>),
    /// `service_execute` with `rollout`: the rollout's manifest names its
    /// targets.
    Rollout,
}

/// At most this many other targets, in at most this many characters, are
/// named in a `plan_not_found` (`Choices::plan_elsewhere`); more are counted,
/// so a large fleet does not bury the sentence.
const MAX_NAMED_OTHERS: usize = 6;
const MAX_NAMED_CHARS: usize = 120;

fn refuse(code: Code, message: String) -> Refusal {
    Refusal::new(code, message)
}

impl Choices {
    /// The configured targets and groups as the server's instructions say
    /// them, once per session: the one place a client reads the names
    /// before its first call (see [`Choices::extend_schema`]).
    pub fn described(&self) -> String {
        let groups: Vec<String> = self
            .groups
            .iter()
            .map(|(group, members)| {
                let names: Vec<&str> = members.iter().map(|i| self.names[*i].as_str()).collect();
                format!("@{group} ({})", names.join(", "))
            })
            .collect();
        let groups =
            if groups.is_empty() { String::new() } else { format!("; groups: {}", groups.join(", ")) };
        format!("Configured targets: {}{groups}.", self.names.join(", "))
    }

    fn listed(&self) -> String {
        self.names.join(", ")
    }

    fn index(&self, tool: ToolName, field: &str, value: &Value) -> Result<usize, Refusal> {
        let Value::String(name) = value else {
            return Err(refuse(
                Code::WrongType,
                format!("{}: `{field}` must be a string naming a target; nothing was run.", tool.as_str()),
            ));
        };
        self.names.iter().position(|n| n == name).ok_or_else(|| {
            refuse(
                Code::UnknownTarget,
                format!(
                    "{}: `{field}` names no configured target (got {}); the targets are {}; nothing was run.",
                    tool.as_str(),
                    shown(name),
                    self.listed()
                ),
            )
        })
    }

    /// The sentence a `plan_not_found` from `asked` gains when several
    /// targets are configured (issue 37): plans are per server, so the id
    /// may be another target's, and the agent's next step is that target,
    /// not a new plan. The other targets are named when they are few and
    /// short, else counted. `None` with one target: there is no other.
    pub fn plan_elsewhere(&self, asked: &str) -> Option<String> {
        let others: Vec<&str> = self.names.iter().map(String::as_str).filter(|n| *n != asked).collect();
        if others.is_empty() {
            return None;
        }
        let listed = others.join(", ");
        let which = if others.len() <= MAX_NAMED_OTHERS && listed.len() <= MAX_NAMED_CHARS {
            listed
        } else {
            format!("one of the {} others configured", others.len())
        };
        Some(format!(
            "Plans are per server and this call asked {asked}; if the plan was made on another target \
             ({which}), call service_execute again with that target."
        ))
    }

    /// Takes `target` (and, for `cloud_check`, `targets`) out of
    /// `arguments`, returning the selection and the rest for the tool's
    /// own validation.
    pub fn select(
        &self,
        tool: ToolName,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<(Selection, Option<Map<String, Value>>), Refusal> {
        let Some(arguments) = arguments else {
            return self.default_one(tool).map(|one| (one, None));
        };
        let mut rest = arguments.clone();
        let target = rest.remove("target");
        let targets = match tool {
            ToolName::CloudCheck | ToolName::ServicePlan => rest.remove("targets"),
            _ => None,
        };
        let rollout = tool == ToolName::ServiceExecute && rest.contains_key("rollout");
        let both = |what: &str| {
            refuse(
                Code::UnexpectedField,
                format!("{}: give {what}, not both; nothing was run.", tool.as_str()),
            )
        };
        let selection = match (target, targets) {
            (Some(_), Some(_)) => return Err(both("`target` (one server) or `targets` (several)")),
            (Some(_), None) if rollout => {
                return Err(both("`rollout` (its targets are recorded) or `target`"));
            }
            (Some(target), None) => Selection::One(self.index(tool, "target", &target)?),
            (None, Some(targets)) if tool == ToolName::CloudCheck => {
                Selection::FanOut(self.several(tool, &targets)?)
            }
            (None, Some(targets)) => Selection::Fleet(self.several(tool, &targets)?),
            (None, None) if rollout => Selection::Rollout,
            (None, None) => self.default_one(tool)?,
        };
        Ok((selection, Some(rest)))
    }

    fn default_one(&self, tool: ToolName) -> Result<Selection, Refusal> {
        match self.names.len() {
            1 => Ok(Selection::One(0)),
            _ => Err(refuse(
                Code::MissingField,
                format!(
                    "{}: `target` is required when several targets are configured: one of {}{}; nothing was run.",
                    tool.as_str(),
                    self.listed(),
                    if tool == ToolName::CloudCheck {
                        " (or `targets` to check several at once)"
                    } else {
                        ""
                    }
                ),
            )),
        }
    }

    /// `targets`: a non-empty list of names and `@group`s, and for
    /// `cloud_check` (read-only) `*`; a rollout names at most
    /// [`MAX_ROLLOUT_HOSTS`] and never "all".
    fn several(&self, tool: ToolName, targets: &Value) -> Result<Vec<usize>, Refusal> {
        let name = tool.as_str();
        let read_only = tool == ToolName::CloudCheck;
        let kinds = if read_only { "target names, @group or \"*\"" } else { "target names or @group" };
        let Value::Array(items) = targets else {
            return Err(refuse(
                Code::WrongType,
                format!("{name}: `targets` must be a list of {kinds}; nothing was run."),
            ));
        };
        if items.is_empty() {
            return Err(refuse(
                Code::NotAllowed,
                format!("{name}: `targets` is empty; name {kinds} ({}); nothing was run.", self.listed()),
            ));
        }
        // Each target once, where it is first named: a fan-out sorts them
        // into fleet order, a rollout keeps the order given (its order).
        let mut chosen: Vec<usize> = Vec::new();
        let mut choose = |index: usize| {
            if !chosen.contains(&index) {
                chosen.push(index);
            }
        };
        for item in items {
            match item.as_str() {
                Some("*") if read_only => (0..self.names.len()).for_each(&mut choose),
                Some("*") => {
                    return Err(refuse(
                        Code::NotAllowed,
                        format!(
                            "{name}: a rollout never means \"all\": name its targets or a @group; nothing was run."
                        ),
                    ));
                }
                Some(group) if group.starts_with('@') => {
                    let Some((_, members)) = self.groups.iter().find(|(g, _)| *g == group[1..]) else {
                        let groups: Vec<String> = self.groups.iter().map(|(g, _)| format!("@{g}")).collect();
                        return Err(refuse(
                            Code::UnknownTarget,
                            format!(
                                "{name}: `targets` names no configured group (got {}); the groups are {}; \
                                 nothing was run.",
                                shown(group),
                                if groups.is_empty() { "none".to_owned() } else { groups.join(", ") }
                            ),
                        ));
                    };
                    members.iter().for_each(|&i| choose(i));
                }
                _ => choose(self.index(tool, "targets", item)?),
            }
        }
        let mut indexes = chosen;
        if read_only {
            indexes.sort_unstable();
        }
        if !read_only && indexes.len() > MAX_ROLLOUT_HOSTS {
            return Err(refuse(
                Code::NotAllowed,
                format!(
                    "{name}: a rollout takes at most {MAX_ROLLOUT_HOSTS} targets (got {}); split it into \
                     several; nothing was run.",
                    indexes.len()
                ),
            ));
        }
        Ok(indexes)
    }

    /// The `target` property every input schema gains, and for
    /// `cloud_check` the `targets` list; `target` is required when several
    /// targets are configured, except on `cloud_check`, which may take
    /// `targets` instead (`select` enforces it).
    ///
    /// Why the names are not an `enum` here (issue 44): every byte of an
    /// input schema is in the model's context on every `tools/list`, and
    /// the names would be there six times each, so the list would grow
    /// with the fleet (16 KB were passed at 3 targets). They are said once,
    /// in the server's instructions ([`Choices::described`]), and a call
    /// that names no configured target is refused with the list
    /// (`unknown_target`), running nothing.
    pub fn extend_schema(&self, tool: ToolName, schema: &mut Map<String, Value>) {
        let several = self.names.len() > 1;
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            properties.insert("target".into(), json!({"type": "string"}));
            if tool == ToolName::CloudCheck {
                properties.insert(
                    "targets".into(),
                    json!({
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "A read-only fan-out instead of `target`: names, @group or \"*\"."
                    }),
                );
            }
            // service_plan's description says what its `targets` are.
            if tool == ToolName::ServicePlan {
                properties.insert("targets".into(), json!({"type": "array", "items": {"type": "string"}}));
            }
        }
        // `targets` or `rollout` may stand in for `target` (`select`).
        let alone = [ToolName::CloudCheck, ToolName::ServicePlan, ToolName::ServiceExecute];
        if several && !alone.contains(&tool) {
            if let Some(Value::Array(required)) = schema.get_mut("required") {
                required.push(json!("target"));
            } else {
                schema.insert("required".into(), json!(["target"]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> Choices {
        Choices {
            names: vec!["db".into(), "web-1".into(), "web-2".into()],
            groups: vec![("prod".into(), vec![0, 1]), ("web".into(), vec![1, 2])],
        }
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    /// Issue 37: `plan_not_found` says nothing of targets with one, names
    /// the others among a few, and counts them in a large fleet.
    #[test]
    fn a_plan_not_found_names_the_other_targets_when_they_are_few() {
        let one = Choices { names: vec!["web-1".into()], groups: vec![] };
        assert_eq!(one.plan_elsewhere("web-1"), None);
        let few = fleet().plan_elsewhere("db").unwrap();
        assert!(few.contains("asked db;") && few.contains("(web-1, web-2)"), "{few}");
        let many = Choices { names: (0..40).map(|i| format!("server-{i}")).collect(), groups: vec![] };
        let counted = many.plan_elsewhere("server-3").unwrap();
        assert!(counted.contains("(one of the 39 others configured)"), "{counted}");
        assert!(counted.ends_with("with that target."), "{counted}");
    }

    #[test]
    fn one_target_may_be_left_out_and_several_must_be_named() {
        let one = Choices { names: vec!["web-1".into()], groups: vec![] };
        let (selection, rest) = one.select(ToolName::ServiceInventory, None).unwrap();
        assert_eq!((selection, rest), (Selection::One(0), None));
        let (selection, rest) = one
            .select(ToolName::CloudCheck, Some(&args(json!({"check": "disk", "target": "web-1"}))))
            .unwrap();
        assert_eq!(selection, Selection::One(0));
        assert_eq!(rest.unwrap(), args(json!({"check": "disk"})), "the tool never sees `target`");

        for tool in [ToolName::ServicePlan, ToolName::CloudCheck] {
            let refusal = fleet().select(tool, Some(&args(json!({"check": "disk"})))).unwrap_err();
            assert_eq!(refusal.code, Code::MissingField, "{tool:?}");
            assert!(refusal.message.contains("db, web-1, web-2"), "{refusal:?}");
        }
        let (selection, _) = fleet()
            .select(ToolName::ServiceExecute, Some(&args(json!({"plan_id": "x", "target": "web-2"}))))
            .unwrap();
        assert_eq!(selection, Selection::One(2));
    }

    /// What was tried: unknown names and groups, wrong types, both fields,
    /// an empty list, `targets` on a tool that does not fan out.
    #[test]
    fn a_bad_selection_is_refused_with_the_choices_and_runs_nothing() {
        let cases = [
            (
                ToolName::CloudCheck,
                json!({"check": "disk", "target": "web-3"}),
                Code::UnknownTarget,
                "db, web-1, web-2",
            ),
            (ToolName::ServicePlan, json!({"target": 7}), Code::WrongType, "must be a string"),
            (
                ToolName::CloudCheck,
                json!({"check": "disk", "targets": ["@dev"]}),
                Code::UnknownTarget,
                "@prod, @web",
            ),
            (
                ToolName::CloudCheck,
                json!({"check": "disk", "targets": ["web-9"]}),
                Code::UnknownTarget,
                "db, web-1",
            ),
            (ToolName::CloudCheck, json!({"check": "disk", "targets": "*"}), Code::WrongType, "a list"),
            (ToolName::CloudCheck, json!({"check": "disk", "targets": []}), Code::NotAllowed, "is empty"),
            (
                ToolName::CloudCheck,
                json!({"check": "disk", "targets": ["*"], "target": "db"}),
                Code::UnexpectedField,
                "not both",
            ),
        ];
        for (tool, arguments, code, needle) in cases {
            let refusal = fleet().select(tool, Some(&args(arguments.clone()))).unwrap_err();
            assert_eq!(refusal.code, code, "{arguments}");
            assert!(refusal.message.contains(needle), "{arguments}: {}", refusal.message);
            assert!(refusal.message.ends_with("nothing was run."), "{}", refusal.message);
        }
        // `targets` is cloud_check's alone: elsewhere it stays in the
        // arguments, and the tool's own validation refuses the stray field.
        let (_, rest) = fleet()
            .select(ToolName::ServiceInventory, Some(&args(json!({"target": "db", "targets": ["*"]}))))
            .unwrap();
        assert!(rest.unwrap().contains_key("targets"));
    }

    /// Issue 43. What was tried: "*" (an implicit all), both `target` and
    /// `targets`, `rollout` with a `target`, an unknown group, more targets
    /// than a rollout takes; each refused, nothing run.
    #[test]
    fn a_rollout_names_its_targets_and_never_means_all() {
        let pick = |arguments: Value, tool| {
            fleet().select(tool, Some(&args(arguments))).map(|(s, rest)| (s, rest.unwrap()))
        };
        let (selection, rest) =
            pick(json!({"action": "update", "targets": ["@web"], "batch_size": 2}), ToolName::ServicePlan)
                .unwrap();
        assert_eq!(selection, Selection::Fleet(vec![1, 2]));
        let (selection, _) =
            pick(json!({"targets": ["web-2", "db", "@web"]}), ToolName::ServicePlan).unwrap();
        assert_eq!(selection, Selection::Fleet(vec![2, 0, 1]), "a rollout keeps the order given, each once");
        assert_eq!(rest, args(json!({"action": "update", "batch_size": 2})), "the tool never sees `targets`");
        let (selection, rest) = pick(json!({"rollout": "ab"}), ToolName::ServiceExecute).unwrap();
        assert_eq!(selection, Selection::Rollout);
        assert!(rest.contains_key("rollout"), "validate reads the rollout id");
        let cases = [
            (ToolName::ServicePlan, json!({"targets": ["*"]}), Code::NotAllowed, "never means \"all\""),
            (
                ToolName::ServicePlan,
                json!({"targets": ["db"], "target": "db"}),
                Code::UnexpectedField,
                "not both",
            ),
            (
                ToolName::ServiceExecute,
                json!({"rollout": "ab", "target": "db"}),
                Code::UnexpectedField,
                "not both",
            ),
            (ToolName::ServicePlan, json!({"targets": ["@dev"]}), Code::UnknownTarget, "@prod, @web"),
            (ToolName::ServicePlan, json!({"targets": []}), Code::NotAllowed, "is empty"),
        ];
        for (tool, arguments, code, needle) in cases {
            let refusal = pick(arguments.clone(), tool).unwrap_err();
            assert_eq!(refusal.code, code, "{arguments}");
            assert!(refusal.message.contains(needle), "{arguments}: {}", refusal.message);
        }
        let many = Choices {
            names: (0..20).map(|i| format!("s{i}")).collect(),
            groups: vec![("all".into(), (0..20).collect())],
        };
        let refusal =
            many.select(ToolName::ServicePlan, Some(&args(json!({"targets": ["@all"]})))).unwrap_err();
        assert!(refusal.message.contains("at most 16 targets (got 20)"), "{}", refusal.message);
        let (selection, _) = many
            .select(ToolName::CloudCheck, Some(&args(json!({"check": "disk", "targets": ["*"]}))))
            .unwrap();
        assert!(
            matches!(selection, Selection::FanOut(indexes) if indexes.len() == 20),
            "a read-only fan-out may take all"
        );
    }

    #[test]
    fn a_fan_out_takes_each_target_once_in_fleet_order() {
        let pick = |targets: Value| match fleet()
            .select(ToolName::CloudCheck, Some(&args(json!({"check": "disk", "targets": targets}))))
            .unwrap()
            .0
        {
            Selection::FanOut(indexes) => indexes,
            other => panic!("{other:?}"),
        };
        assert_eq!(pick(json!(["*"])), [0, 1, 2]);
        assert_eq!(pick(json!(["web-2", "@prod"])), [0, 1, 2]);
        assert_eq!(pick(json!(["@web", "web-1"])), [1, 2]);
        assert_eq!(pick(json!(["db"])), [0]);
    }

    #[test]
    fn the_schema_names_no_target_and_requires_one_only_among_several() {
        let mut schema = args(json!({"type": "object", "properties": {"app": {}}, "required": ["app"]}));
        fleet().extend_schema(ToolName::ServiceLogs, &mut schema);
        assert_eq!(schema["properties"]["target"], json!({"type": "string"}));
        assert_eq!(schema["required"], json!(["app", "target"]));
        assert!(
            schema["properties"].get("targets").is_none(),
            "only cloud_check and service_plan take several"
        );
        // A rollout's execute names no target, and a rollout's plan takes `targets`.
        let mut execute = args(json!({"type": "object", "properties": {"plan_id": {}}}));
        fleet().extend_schema(ToolName::ServiceExecute, &mut execute);
        assert!(execute.get("required").is_none(), "{execute:?}");
        let mut plan = args(json!({"type": "object", "properties": {}, "required": ["action"]}));
        fleet().extend_schema(ToolName::ServicePlan, &mut plan);
        assert_eq!(plan["required"], json!(["action"]));
        assert_eq!(plan["properties"]["targets"]["items"], json!({"type": "string"}));

        let mut check = args(json!({"type": "object", "properties": {"check": {}}, "required": ["check"]}));
        fleet().extend_schema(ToolName::CloudCheck, &mut check);
        assert_eq!(check["properties"]["targets"]["items"], json!({"type": "string"}));
        assert_eq!(check["required"], json!(["check"]));

        let one = Choices { names: vec!["web-1".into()], groups: vec![] };
        let mut schema = args(json!({"type": "object", "properties": {}}));
        one.extend_schema(ToolName::ServiceInventory, &mut schema);
        assert_eq!(schema["properties"]["target"], json!({"type": "string"}));
        assert!(schema.get("required").is_none());
        // The names are said once, with the groups' members.
        assert_eq!(
            fleet().described(),
            "Configured targets: db, web-1, web-2; groups: @prod (db, web-1), @web (web-1, web-2)."
        );
        assert_eq!(one.described(), "Configured targets: web-1.");
    }
}
