//! Users, roles and clone tickets as vCenter keeps them: a configured ReadOnly user reads but
//! cannot clone or power (`NoPermission` naming the privilege), the AuthorizationManager
//! answers for roles, privileges and permissions, and a clone ticket opens one more session
//! of its user once, within its lifetime.

use infrasim_clock::FakeClock;
use infrasim_vsphere_sim::authorization::{SimUser, SystemRole};
use infrasim_vsphere_sim::{SimConfig, Simulator};
use std::sync::Arc;
use std::time::Duration;

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

fn sim(clock: &FakeClock) -> Simulator {
    let config = SimConfig {
        password: "pw".into(),
        users: vec![SimUser {
            name: "readonly@vsphere.local".into(),
            password: "ro-pw".into(),
            role: SystemRole::ReadOnly,
        }],
        ..SimConfig::default()
    };
    Simulator::new(config, Arc::new(clock.clone()))
}

/// (status, body, the session cookie set).
async fn call(s: &Simulator, body: &str, cookie: Option<&str>) -> (u16, String, Option<String>) {
    let r = s.handle(&envelope(body), cookie, "test").await;
    (r.status, r.body, r.set_cookie)
}

async fn login(s: &Simulator, user: &str, password: &str) -> (u16, String, Option<String>) {
    call(s, &format!(r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>{user}</userName><password>{password}</password></Login>"#), None).await
}

/// The text of an answer's first `returnval`.
fn returnval(body: &str) -> String {
    text_of(body, "returnval")
}

/// The text of the first element `<tag>` of an answer.
fn text_of(body: &str, tag: &str) -> String {
    let after = body.split(&format!("<{tag}>")).nth(1).expect("the element");
    after.split('<').next().unwrap_or_default().to_string()
}

fn vm(s: &Simulator) -> String {
    s.with_inventory(|inv| {
        inv.iter()
            .find(|o| o.moref.ty == "VirtualMachine")
            .map(|o| o.moref.value.clone())
            .unwrap()
    })
}

#[tokio::test]
async fn a_read_only_user_reads_but_cannot_clone_or_power() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let (status, body, _) = login(&s, "readonly@vsphere.local", "wrong").await;
    assert_eq!(status, 500);
    assert!(body.contains("InvalidLogin"), "{body}");
    let (status, body, cookie) = login(&s, "readonly@vsphere.local", "ro-pw").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<userName>readonly@vsphere.local</userName>"));
    let ro = cookie.unwrap();
    let vm = vm(&s);
    let (status, body, _) = call(&s, &format!(r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>VirtualMachine</type><pathSet>name</pathSet></propSet><objectSet><obj type="VirtualMachine">{vm}</obj></objectSet></specSet><options/></RetrievePropertiesEx>"#), Some(&ro)).await;
    assert_eq!(status, 200, "{body}");
    let clone = format!(
        r#"<CloneVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this><folder type="Folder">group-v3</folder><name>ro-clone</name><spec><location/><template>false</template><powerOn>false</powerOn></spec></CloneVM_Task>"#
    );
    let (status, body, _) = call(&s, &clone, Some(&ro)).await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("NoPermission"), "{body}");
    assert!(
        body.contains("<privilegeId>VirtualMachine.Provisioning.Clone</privilegeId>"),
        "{body}"
    );
    assert!(body.contains(&format!(r#"<object type="VirtualMachine">{vm}</object>"#)));
    let power = format!(
        r#"<PowerOffVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this></PowerOffVM_Task>"#
    );
    let (_, body, _) = call(&s, &power, Some(&ro)).await;
    assert!(body.contains("VirtualMachine.Interact.PowerOff"), "{body}");
    // The administrator may.
    let (_, _, admin) = login(&s, "administrator@vsphere.local", "pw").await;
    let (status, body, _) = call(&s, &power, admin.as_deref()).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn the_authorization_manager_answers_for_roles_privileges_and_permissions() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let (_, _, ro) = login(&s, "readonly@vsphere.local", "ro-pw").await;
    let ro = ro.unwrap();
    let (_, content, _) = call(&s, r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#, None).await;
    assert!(content.contains(
        r#"<authorizationManager type="AuthorizationManager">AuthorizationManager</authorizationManager>"#
    ));
    let (_, roles, _) = call(&s, r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>AuthorizationManager</type><pathSet>roleList</pathSet></propSet><objectSet><obj type="AuthorizationManager">AuthorizationManager</obj></objectSet></specSet><options/></RetrievePropertiesEx>"#, Some(&ro)).await;
    assert!(roles.contains("<roleId>-2</roleId>"), "{roles}");
    assert!(roles.contains("<name>ReadOnly</name>"));
    // The session's own privileges, asked by key.
    let (_, session, _) = call(&s, r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>SessionManager</type><pathSet>currentSession</pathSet></propSet><objectSet><obj type="SessionManager">SessionManager</obj></objectSet></specSet><options/></RetrievePropertiesEx>"#, Some(&ro)).await;
    let key = text_of(&session, "key");
    let (status, has, _) = call(&s, &format!(r#"<HasPrivilegeOnEntity xmlns="urn:vim25"><_this type="AuthorizationManager">AuthorizationManager</_this><entity type="Folder">group-d1</entity><sessionId>{key}</sessionId><privId>VirtualMachine.Provisioning.Clone</privId><privId>System.Read</privId></HasPrivilegeOnEntity>"#), Some(&ro)).await;
    assert_eq!(status, 200, "{has}");
    assert!(
        has.contains("<returnval>false</returnval><returnval>true</returnval>"),
        "{has}"
    );
    let (_, perms, _) = call(&s, r#"<RetrieveAllPermissions xmlns="urn:vim25"><_this type="AuthorizationManager">AuthorizationManager</_this></RetrieveAllPermissions>"#, Some(&ro)).await;
    assert!(
        perms.contains("<principal>readonly@vsphere.local</principal>"),
        "{perms}"
    );
    assert!(perms.contains("<principal>administrator@vsphere.local</principal>"));
    assert_eq!(perms.matches("<propagate>true</propagate>").count(), 2);
    let (_, fetched, _) = call(&s, r#"<FetchUserPrivilegeOnEntities xmlns="urn:vim25"><_this type="AuthorizationManager">AuthorizationManager</_this><entities type="Folder">group-d1</entities><userName>readonly@vsphere.local</userName></FetchUserPrivilegeOnEntities>"#, Some(&ro)).await;
    assert!(fetched.contains("System.Read"), "{fetched}");
    assert!(!fetched.contains("VirtualMachine.Provisioning.Clone"));
}

#[tokio::test]
async fn a_clone_ticket_opens_one_session_of_its_user_once_and_expires() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let (_, _, ro) = login(&s, "readonly@vsphere.local", "ro-pw").await;
    let ro = ro.unwrap();
    let acquire = r#"<AcquireCloneTicket xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this></AcquireCloneTicket>"#;
    let (status, body, _) = call(&s, acquire, Some(&ro)).await;
    assert_eq!(status, 200, "{body}");
    let ticket = returnval(&body);
    let redeem = |t: &str| {
        format!(
            r#"<CloneSession xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><cloneTicket>{t}</cloneTicket></CloneSession>"#
        )
    };
    // No cookie: the ticket is the credential.
    let (status, body, cookie) = call(&s, &redeem(&ticket), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<userName>readonly@vsphere.local</userName>"));
    let cloned = cookie.expect("a new session");
    assert_ne!(cloned, ro);
    // The clone has the user's role, not more.
    let vm = vm(&s);
    let (_, body, _) = call(&s, &format!(r#"<PowerOnVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this></PowerOnVM_Task>"#), Some(&cloned)).await;
    assert!(body.contains("NoPermission"), "{body}");
    let (_, again, _) = call(&s, &redeem(&ticket), None).await;
    assert!(
        again.contains("InvalidLogin"),
        "a ticket works once: {again}"
    );
    let (_, body, _) = call(&s, acquire, Some(&ro)).await;
    let late = returnval(&body);
    clock.advance(Duration::from_secs(61));
    let (_, expired, _) = call(&s, &redeem(&late), None).await;
    assert!(expired.contains("InvalidLogin"), "{expired}");
}
