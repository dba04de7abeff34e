//! Installing CRDs into a plane: a definition marked "only if absent" (metal3's
//! BareMetalHost) is installed where the plane has none, and a plane's own is left as it is.

mod common;

use infrasim_controllers::crds::{self, ONLY_IF_ABSENT};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};

const HOSTS: &str = "baremetalhosts.metal3.io";

fn marked(crd: &CustomResourceDefinition) -> bool {
    crd.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ONLY_IF_ABSENT))
}

#[tokio::test]
async fn a_definition_only_if_absent_is_installed_where_missing_and_never_replaces_another() {
    let empty = common::Plane::start(21000..=21001).await;
    crds::install(&empty.client, &crds::sip()).await.unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(empty.client.clone());
    assert!(
        marked(&api.get(HOSTS).await.unwrap()),
        "ours, where none was"
    );

    let with_metal3 = common::Plane::start(21002..=21003).await;
    let api: Api<CustomResourceDefinition> = Api::all(with_metal3.client.clone());
    let mut theirs = crds::sip()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(HOSTS))
        .unwrap();
    theirs.metadata.annotations = None;
    theirs.spec.names.short_names = Some(vec!["bmh".into()]);
    api.create(&PostParams::default(), &theirs).await.unwrap();
    crds::install(&with_metal3.client, &crds::sip())
        .await
        .unwrap();
    let now = api.get(HOSTS).await.unwrap();
    assert!(!marked(&now), "metal3's own definition is kept");
    assert_eq!(now.spec.names.short_names, Some(vec!["bmh".to_string()]));
    assert!(api
        .get_opt("sipclusters.airship.airshipit.org")
        .await
        .unwrap()
        .is_some());
}
