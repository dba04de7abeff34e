//! CustomFieldsManager: custom attribute definitions and their values on entities
//! (`customValue`, `availableField`), as govc `fields.*` and CAPV's tagging fallbacks use.

use crate::call::{arg_moref, Call};
use crate::fault::Fault;
use crate::objects::ManagedObject;
use crate::soap::Element;
use crate::state::State;
use crate::value::{write_element, Data, Moref, Val};

pub(crate) fn install(inv: &mut crate::objects::Inventory) {
    let m = crate::objects::refs::custom_fields_manager();
    let mut o = ManagedObject::new(&m.ty, &m.value);
    o.set("field", Val::Array("CustomFieldDef", vec![]));
    inv.insert(o);
}

fn definitions(state: &State) -> Vec<Data> {
    match state
        .inventory
        .get(&crate::objects::refs::custom_fields_manager())
        .and_then(|o| o.props.get("field"))
    {
        Some(Val::Array(_, items)) => items
            .iter()
            .filter_map(|v| match v {
                Val::Data(d) => Some(Data::clone(d)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn set_definitions(state: &mut State, defs: Vec<Data>) {
    if let Some(o) = state
        .inventory
        .get_mut(&crate::objects::refs::custom_fields_manager())
    {
        o.set(
            "field",
            Val::Array("CustomFieldDef", defs.into_iter().map(Val::from).collect()),
        );
    }
}

pub(crate) fn dispatch(
    state: &mut State,
    _call: &mut Call<'_>,
    _this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    Some(match method {
        "AddCustomFieldDef" => add_definition(state, args),
        "RemoveCustomFieldDef" => remove_definition(state, args),
        "SetField" => set_field(state, args),
        _ => return None,
    })
}

/// AddCustomFieldDef: a string field of a unique name, keyed after the highest key, that
/// whoever can view the inventory may read and write.
fn add_definition(state: &mut State, args: &Element) -> Result<String, Fault> {
    let name = args.text_of("name").unwrap_or("").trim().to_string();
    let mo_type = args.text_of("moType").unwrap_or("").trim().to_string();
    let mut defs = definitions(state);
    if name.is_empty() {
        return Err(Fault::invalid_argument("name"));
    }
    if defs
        .iter()
        .any(|d| d.get("name").and_then(Val::as_str) == Some(name.as_str()))
    {
        return Err(crate::fault::duplicate_name(
            &name,
            &crate::objects::refs::custom_fields_manager(),
        ));
    }
    let key = defs
        .iter()
        .filter_map(|d| match d.get("key") {
            Some(Val::Int(k)) => Some(*k),
            _ => None,
        })
        .max()
        .unwrap_or(0)
        + 1;
    let privileges = || {
        Data::new("PrivilegePolicyDef")
            .with("createPrivilege", "System.View")
            .with("readPrivilege", "System.View")
            .with("updatePrivilege", "System.View")
            .with("deletePrivilege", "System.View")
    };
    let def = Data::new("CustomFieldDef")
        .with("key", key)
        .with("name", name.as_str())
        .with("type", "string")
        .with("managedObjectType", mo_type.as_str())
        .with("fieldDefPrivileges", privileges())
        .with("fieldInstancePrivileges", privileges());
    defs.push(def.clone());
    set_definitions(state, defs);
    let mut out = String::new();
    write_element(&mut out, "returnval", &Val::from(def), false);
    Ok(out)
}

/// RemoveCustomFieldDef: the definition with the argument's key.
fn remove_definition(state: &mut State, args: &Element) -> Result<String, Fault> {
    let key = args
        .text_of("key")
        .and_then(|k| k.trim().parse::<i32>().ok())
        .unwrap_or(-1);
    let mut defs = definitions(state);
    let before = defs.len();
    defs.retain(|d| d.get("key") != Some(&Val::Int(key)));
    if defs.len() == before {
        return Err(Fault::invalid_argument("key"));
    }
    set_definitions(state, defs);
    Ok(String::new())
}

/// SetField: an entity's value of a defined field (an empty value removes it), with the
/// definitions it may have values of.
fn set_field(state: &mut State, args: &Element) -> Result<String, Fault> {
    let entity = arg_moref(args, "entity")?;
    let key = args
        .text_of("key")
        .and_then(|k| k.trim().parse::<i32>().ok())
        .unwrap_or(-1);
    let value = args.text_of("value").unwrap_or("").to_string();
    let defs = definitions(state);
    if !defs.iter().any(|d| d.get("key") == Some(&Val::Int(key))) {
        return Err(Fault::invalid_argument("key"));
    }
    let Some(o) = state.inventory.get_mut(&entity) else {
        return Err(Fault::not_found(&entity));
    };
    let mut values: Vec<Val> = match o.props.get("customValue") {
        Some(Val::Array(_, items)) => items.clone(),
        _ => Vec::new(),
    };
    values.retain(|v| v.path("key") != Some(&Val::Int(key)));
    if !value.is_empty() {
        values.push(Val::from(
            Data::new("CustomFieldStringValue")
                .with("key", key)
                .with("value", value.as_str()),
        ));
    }
    o.set(
        "customValue",
        Val::Array("CustomFieldValue", values.clone()),
    );
    o.set("value", Val::Array("CustomFieldValue", values));
    o.set(
        "availableField",
        Val::Array("CustomFieldDef", defs.into_iter().map(Val::from).collect()),
    );
    Ok(String::new())
}
