//! The service's accounts and the Redfish predefined roles (DSP0266's `Administrator`,
//! `Operator`, `ReadOnly`, with the privileges the standard assigns them).

use crate::errors::RedfishError;
use serde_json::Value;
use subtle::ConstantTimeEq;

/// A role's privileges, as Redfish names them.
pub fn privileges(role: &str) -> Option<&'static [&'static str]> {
    Some(match role {
        "Administrator" => &[
            "Login",
            "ConfigureManager",
            "ConfigureUsers",
            "ConfigureSelf",
            "ConfigureComponents",
        ],
        "Operator" => &["Login", "ConfigureSelf", "ConfigureComponents"],
        "ReadOnly" => &["Login", "ConfigureSelf"],
        _ => return None,
    })
}

/// The predefined roles, in order.
pub const ROLES: [&str; 3] = ["Administrator", "Operator", "ReadOnly"];

/// Passwords the service accepts are at most this long.
pub const MAX_PASSWORD: usize = 127;

/// An account.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Account {
    /// Its `Id`: a number, never reused.
    pub id: String,
    pub user: String,
    password: String,
    pub role: String,
    pub enabled: bool,
}

impl Account {
    /// Whether this account may do what `privilege` names.
    pub fn may(&self, privilege: &str) -> bool {
        privileges(&self.role).is_some_and(|p| p.contains(&privilege))
    }
}

/// Every account, in the order they were made. Serializable (passwords included) for a
/// simulator that keeps its BMCs' accounts across restarts, in its own store.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Accounts {
    all: Vec<Account>,
    next: u64,
}

impl Accounts {
    /// The accounts with one administrator.
    pub fn with_admin(user: &str, password: &str) -> Self {
        let mut a = Accounts::default();
        a.push(user, password, "Administrator");
        a
    }

    fn push(&mut self, user: &str, password: &str, role: &str) -> &Account {
        self.next += 1;
        self.all.push(Account {
            id: self.next.to_string(),
            user: user.to_string(),
            password: password.to_string(),
            role: role.to_string(),
            enabled: true,
        });
        &self.all[self.all.len() - 1]
    }

    pub fn all(&self) -> &[Account] {
        &self.all
    }

    pub fn get(&self, id: &str) -> Option<&Account> {
        self.all.iter().find(|a| a.id == id)
    }

    /// The enabled account `user` whose password is `password`.
    pub fn check(&self, user: &str, password: &str) -> Option<&Account> {
        self.all.iter().find(|a| {
            a.enabled
                && a.user == user
                && bool::from(a.password.as_bytes().ct_eq(password.as_bytes()))
        })
    }

    /// An account made from a POST body (`UserName`, `Password`, `RoleId`, `Enabled`).
    pub fn create(&mut self, body: &Value) -> Result<Account, RedfishError> {
        let user = required_str(body, "UserName")?;
        let password = required_str(body, "Password")?;
        let role = required_str(body, "RoleId")?;
        check_password(password)?;
        if privileges(role).is_none() {
            return Err(RedfishError::value_not_in_list(role, "RoleId"));
        }
        if self.all.iter().any(|a| a.user == user) {
            return Err(RedfishError::already_exists("UserName", user));
        }
        let enabled = match body.get("Enabled") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(v) => return Err(RedfishError::value_type(&v.to_string(), "Enabled")),
        };
        self.push(user, password, role);
        let last = self.all.len() - 1;
        self.all[last].enabled = enabled;
        Ok(self.all[last].clone())
    }

    /// Applies a PATCH body to account `id`. An account may change its own password without
    /// `ConfigureUsers` (`ConfigureSelf`), nothing else.
    pub fn update(&mut self, id: &str, body: &Value, by: &Account) -> Result<(), RedfishError> {
        let fields = body.as_object().ok_or_else(RedfishError::malformed_json)?;
        let own = by.id == id;
        for key in fields.keys() {
            match key.as_str() {
                "Password" if own || by.may("ConfigureUsers") => {}
                "UserName" | "RoleId" | "Enabled" | "Locked" | "Password"
                    if !by.may("ConfigureUsers") =>
                {
                    return Err(RedfishError::insufficient_privilege())
                }
                "UserName" | "RoleId" | "Enabled" | "Locked" => {}
                "Id" | "Name" | "Links" | "AccountTypes" | "Description" => {
                    return Err(RedfishError::property_not_writable(key))
                }
                k if k.starts_with('@') => {}
                other => return Err(RedfishError::property_unknown(other)),
            }
        }
        let mut next = self
            .get(id)
            .cloned()
            .ok_or_else(|| RedfishError::not_found(id))?;
        if let Some(v) = fields.get("Password") {
            let p = v
                .as_str()
                .ok_or_else(|| RedfishError::value_type(&v.to_string(), "Password"))?;
            check_password(p)?;
            next.password = p.to_string();
        }
        if let Some(v) = fields.get("RoleId") {
            let r = v.as_str().unwrap_or_default();
            privileges(r).ok_or_else(|| RedfishError::value_not_in_list(r, "RoleId"))?;
            next.role = r.to_string();
        }
        if let Some(v) = fields.get("UserName") {
            let u = v
                .as_str()
                .filter(|u| !u.is_empty())
                .ok_or_else(|| RedfishError::value_type(&v.to_string(), "UserName"))?;
            if self.all.iter().any(|a| a.user == u && a.id != id) {
                return Err(RedfishError::already_exists("UserName", u));
            }
            next.user = u.to_string();
        }
        if let Some(v) = fields.get("Enabled") {
            next.enabled = v
                .as_bool()
                .ok_or_else(|| RedfishError::value_type(&v.to_string(), "Enabled"))?;
        }
        if let Some(slot) = self.all.iter_mut().find(|a| a.id == id) {
            *slot = next;
        }
        Ok(())
    }

    /// Removes account `id`; the last administrator stays, so the service is never locked.
    pub fn delete(&mut self, id: &str) -> Result<Account, RedfishError> {
        let at = self
            .all
            .iter()
            .position(|a| a.id == id)
            .ok_or_else(|| RedfishError::not_found(id))?;
        let admins = self
            .all
            .iter()
            .filter(|a| a.role == "Administrator" && a.enabled)
            .count();
        if self.all[at].role == "Administrator" && admins == 1 {
            return Err(RedfishError::conflict(
                "the last enabled administrator cannot be removed",
            ));
        }
        Ok(self.all.remove(at))
    }
}

fn required_str<'a>(body: &'a Value, name: &str) -> Result<&'a str, RedfishError> {
    match body.get(name) {
        None | Some(Value::Null) => Err(RedfishError::parameter_missing("Create", name)),
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(v) => Err(RedfishError::value_type(&v.to_string(), name)),
    }
}

fn check_password(p: &str) -> Result<(), RedfishError> {
    if p.is_empty() || p.len() > MAX_PASSWORD {
        return Err(RedfishError::value_out_of_range("<password>", "Password"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accounts_check_passwords_and_keep_their_ids() {
        let mut a = Accounts::with_admin("root", "pw");
        assert!(a.check("root", "pw").is_some());
        assert!(a.check("root", "px").is_none());
        let op = a
            .create(&json!({"UserName": "op", "Password": "x", "RoleId": "Operator"}))
            .unwrap();
        assert_eq!(op.id, "2");
        assert!(op.may("ConfigureComponents") && !op.may("ConfigureUsers"));
        let dup = a.create(&json!({"UserName": "op", "Password": "y", "RoleId": "ReadOnly"}));
        assert_eq!(dup.unwrap_err().status, 409);
        let bad = a.create(&json!({"UserName": "z", "Password": "y", "RoleId": "Boss"}));
        assert_eq!(bad.unwrap_err().id, "PropertyValueNotInList");
        a.delete("2").unwrap();
        let again = a
            .create(&json!({"UserName": "op", "Password": "x", "RoleId": "Operator"}))
            .unwrap();
        assert_eq!(again.id, "3", "ids are never reused");
    }

    #[test]
    fn an_operator_changes_its_own_password_and_nothing_else() {
        let mut a = Accounts::with_admin("root", "pw");
        let op = a
            .create(&json!({"UserName": "op", "Password": "x", "RoleId": "Operator"}))
            .unwrap();
        a.update("2", &json!({"Password": "new"}), &op).unwrap();
        assert!(a.check("op", "new").is_some());
        let e = a
            .update("2", &json!({"RoleId": "Administrator"}), &op)
            .unwrap_err();
        assert_eq!(e.status, 403);
        let e = a
            .update("1", &json!({"Password": "mine"}), &op)
            .unwrap_err();
        assert_eq!(e.status, 403);
        let e = a.delete("1").unwrap_err();
        assert_eq!(e.status, 409, "the last administrator stays");
    }
}
