//! A simulated etcd cluster's membership as raft would leave it: members with IDs stable for
//! their life, one leader among the voting members, the raft term that every leader change
//! raises, and the alarms members have raised. Pure data; [`crate::EtcdCluster`] locks it.

use crate::pb::etcdserverpb::{AlarmMember, AlarmType, Member as PbMember};
use std::collections::{BTreeMap, BTreeSet};

/// Why a membership request was refused, with etcd's own messages (clients match on them).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MemberError {
    #[error("etcdserver: member not found")]
    NotFound,
    #[error("etcdserver: Peer URLs already exists")]
    PeerUrlExists,
    #[error("etcdserver: given member URLs are invalid")]
    BadUrls,
    #[error("etcdserver: can only promote a learner member")]
    NotLearner,
    #[error("etcdserver: too many learner members in cluster")]
    TooManyLearners,
    #[error("etcdserver: bad leader transferee")]
    BadTransferee,
    #[error("etcdserver: not leader")]
    NotLeader,
    #[error("etcdserver: re-configuration failed due to not enough started members")]
    LastMember,
}

/// One member.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub id: u64,
    /// Empty until the member has started (added but not yet running, as after MemberAdd).
    pub name: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub is_learner: bool,
}

impl Member {
    pub fn to_pb(&self) -> PbMember {
        PbMember {
            id: self.id,
            name: self.name.clone(),
            peer_ur_ls: self.peer_urls.clone(),
            client_ur_ls: self.client_urls.clone(),
            is_learner: self.is_learner,
        }
    }
}

/// The membership of one cluster.
#[derive(Debug)]
pub struct Members {
    pub cluster_id: u64,
    members: BTreeMap<u64, Member>,
    leader: Option<u64>,
    term: u64,
    /// Raft's committed index: raised by every change the cluster agrees on.
    index: u64,
    alarms: BTreeSet<(u64, i32)>,
    /// The members whose etcd is down (a fault): they answer nothing and lead nothing. Not
    /// kept in the image: whoever downed them says so again after a restart.
    down: BTreeSet<u64>,
    /// Raised by every change of the membership, leadership or alarms (not of keys): what a
    /// keeper of the membership looks at to know it must save it again.
    changes: u64,
}

/// The membership as it stands, to be kept and given back with [`Members::restore`] (a
/// restarted process keeps its clusters' member IDs, leader and term).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MembershipImage {
    pub cluster_id: u64,
    pub members: Vec<Member>,
    pub leader: Option<u64>,
    pub term: u64,
    pub index: u64,
    /// `(member ID, alarm type)`.
    pub alarms: Vec<(u64, i32)>,
}

/// etcd allows one learner at a time.
const MAX_LEARNERS: usize = 1;

impl Members {
    pub fn new(cluster_id: u64) -> Self {
        Members {
            cluster_id,
            members: BTreeMap::new(),
            leader: None,
            term: 0,
            index: 0,
            alarms: BTreeSet::new(),
            down: BTreeSet::new(),
            changes: 0,
        }
    }

    /// The membership an image kept.
    pub fn restore(image: MembershipImage) -> Self {
        Members {
            cluster_id: image.cluster_id,
            members: image.members.into_iter().map(|m| (m.id, m)).collect(),
            leader: image.leader,
            term: image.term,
            index: image.index,
            alarms: image.alarms.into_iter().collect(),
            down: BTreeSet::new(),
            changes: 0,
        }
    }

    /// The membership as it stands.
    pub fn image(&self) -> MembershipImage {
        MembershipImage {
            cluster_id: self.cluster_id,
            members: self.members.values().cloned().collect(),
            leader: self.leader,
            term: self.term,
            index: self.index,
            alarms: self.alarms.iter().copied().collect(),
        }
    }

    /// How many times the membership, leadership or alarms changed (see `changes`).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    pub fn leader(&self) -> Option<u64> {
        self.leader
    }

    pub fn term(&self) -> u64 {
        self.term
    }

    pub fn index(&self) -> u64 {
        self.index
    }

    /// Counts a change the cluster agreed on (a key written, a member changed).
    pub fn commit(&mut self) {
        self.index += 1;
    }

    /// Counts a change of the membership itself, and commits it.
    fn commit_membership(&mut self) {
        self.changes += 1;
        self.commit();
    }

    pub fn get(&self, id: u64) -> Option<&Member> {
        self.members.get(&id)
    }

    pub fn by_name(&self, name: &str) -> Option<&Member> {
        self.members.values().find(|m| m.name == name)
    }

    pub fn list(&self) -> Vec<PbMember> {
        self.members.values().map(Member::to_pb).collect()
    }

    /// A member named `name` starts with `peer_url` and `client_url`: the one added for that
    /// peer URL if there is one (MemberAdd, then the member's etcd comes up, as kubeadm joins
    /// a control plane), else a new voting member. The first member leads.
    pub fn start(&mut self, name: &str, peer_url: &str, client_url: &str) -> u64 {
        if let Some(m) = self.by_name(name) {
            return m.id;
        }
        let id = match self
            .members
            .values_mut()
            .find(|m| m.name.is_empty() && m.peer_urls.iter().any(|u| u == peer_url))
        {
            Some(m) => {
                m.name = name.to_string();
                m.client_urls = vec![client_url.to_string()];
                m.id
            }
            None => {
                let id = self.new_id();
                self.members.insert(
                    id,
                    Member {
                        id,
                        name: name.to_string(),
                        peer_urls: vec![peer_url.to_string()],
                        client_urls: vec![client_url.to_string()],
                        is_learner: false,
                    },
                );
                id
            }
        };
        self.commit_membership();
        if self.leader.is_none() && self.has_quorum() {
            self.elect(Some(id));
        }
        id
    }

    /// Marks member `id` down (its etcd stopped) or up again; whether that changed anything.
    /// Leadership follows, as raft's elections would: a down leader hands over to the
    /// lowest-numbered voting member up while a majority of the voters is up; without a
    /// majority there is no leader, until one is back.
    pub fn set_down(&mut self, id: u64, down: bool) -> bool {
        let changed = match down {
            true => self.members.contains_key(&id) && self.down.insert(id),
            false => self.down.remove(&id),
        };
        if changed {
            self.changes += 1;
            self.follow_quorum();
        }
        changed
    }

    pub fn is_down(&self, id: u64) -> bool {
        self.down.contains(&id)
    }

    /// Whether a majority of the started voting members is up (true before any started:
    /// nothing is lost yet).
    pub fn has_quorum(&self) -> bool {
        let voters: Vec<u64> = self.voters().collect();
        if voters.is_empty() {
            return true;
        }
        let up = voters.iter().filter(|id| !self.down.contains(id)).count();
        up * 2 > voters.len()
    }

    /// The first started voting member that is up.
    pub fn first_up(&self) -> Option<u64> {
        self.voters().find(|id| !self.down.contains(id))
    }

    /// The started voting members, lowest ID first.
    fn voters(&self) -> impl Iterator<Item = u64> + '_ {
        (self.members.values())
            .filter(|m| !m.is_learner && !m.name.is_empty())
            .map(|m| m.id)
    }

    /// Elects a leader that is up while there is a quorum, and none without one.
    fn follow_quorum(&mut self) {
        let up = |id: &u64| !self.down.contains(id);
        let next = match self.has_quorum() {
            true if self.leader.is_some_and(|l| up(&l)) => return,
            true => self.voters().find(|id| up(id)),
            false => None,
        };
        if next != self.leader {
            self.elect(next);
        }
    }

    /// MemberAdd: a member that has not started yet.
    pub fn add(&mut self, peer_urls: Vec<String>, is_learner: bool) -> Result<Member, MemberError> {
        if peer_urls.is_empty() || peer_urls.iter().any(|u| !valid_url(u)) {
            return Err(MemberError::BadUrls);
        }
        let taken = |m: &Member| m.peer_urls.iter().any(|u| peer_urls.contains(u));
        if self.members.values().any(taken) {
            return Err(MemberError::PeerUrlExists);
        }
        if is_learner && self.members.values().filter(|m| m.is_learner).count() >= MAX_LEARNERS {
            return Err(MemberError::TooManyLearners);
        }
        let member = Member {
            id: self.new_id(),
            name: String::new(),
            peer_urls,
            client_urls: Vec::new(),
            is_learner,
        };
        self.members.insert(member.id, member.clone());
        self.commit_membership();
        Ok(member)
    }

    /// MemberRemove. A removed leader hands over to the lowest-numbered voting member left.
    pub fn remove(&mut self, id: u64) -> Result<(), MemberError> {
        if !self.members.contains_key(&id) {
            return Err(MemberError::NotFound);
        }
        let voters = self.members.values().filter(|m| !m.is_learner).count();
        if voters == 1 && !self.members[&id].is_learner {
            return Err(MemberError::LastMember);
        }
        self.members.remove(&id);
        self.alarms.retain(|(member, _)| *member != id);
        self.commit_membership();
        self.down.remove(&id);
        if self.leader == Some(id) {
            self.leader = None;
            self.follow_quorum();
        }
        Ok(())
    }

    /// MemberUpdate: new peer URLs.
    pub fn update(&mut self, id: u64, peer_urls: Vec<String>) -> Result<(), MemberError> {
        if peer_urls.is_empty() || peer_urls.iter().any(|u| !valid_url(u)) {
            return Err(MemberError::BadUrls);
        }
        let taken = self
            .members
            .values()
            .any(|m| m.id != id && m.peer_urls.iter().any(|u| peer_urls.contains(u)));
        if taken {
            return Err(MemberError::PeerUrlExists);
        }
        let member = self.members.get_mut(&id).ok_or(MemberError::NotFound)?;
        member.peer_urls = peer_urls;
        self.commit_membership();
        Ok(())
    }

    /// MemberPromote: a learner becomes a voting member.
    pub fn promote(&mut self, id: u64) -> Result<(), MemberError> {
        let member = self.members.get_mut(&id).ok_or(MemberError::NotFound)?;
        if !member.is_learner {
            return Err(MemberError::NotLearner);
        }
        member.is_learner = false;
        self.commit_membership();
        Ok(())
    }

    /// MoveLeader, asked of member `via`: only the leader can hand leadership over, and only
    /// to a started voting member.
    pub fn move_leader(&mut self, via: u64, target: u64) -> Result<(), MemberError> {
        if self.leader != Some(via) {
            return Err(MemberError::NotLeader);
        }
        match self.members.get(&target) {
            Some(m) if !m.is_learner && !m.name.is_empty() && !self.down.contains(&target) => {}
            _ => return Err(MemberError::BadTransferee),
        }
        if target != via {
            self.elect(Some(target));
        }
        Ok(())
    }

    fn elect(&mut self, leader: Option<u64>) {
        self.leader = leader;
        self.term += 1;
        self.changes += 1;
    }

    /// Raises `alarm` on `member` (0: every member).
    pub fn activate_alarm(&mut self, member: u64, alarm: AlarmType) -> Vec<AlarmMember> {
        if alarm != AlarmType::None {
            let ids: Vec<u64> = match member {
                0 => self.members.keys().copied().collect(),
                id if self.members.contains_key(&id) => vec![id],
                _ => Vec::new(),
            };
            for id in &ids {
                self.alarms.insert((*id, alarm as i32));
            }
            self.commit_membership();
            return ids
                .into_iter()
                .map(|id| alarm_member(id, alarm as i32))
                .collect();
        }
        Vec::new()
    }

    /// Clears `alarm` (NONE: every alarm) on `member` (0: every member); what was cleared.
    pub fn deactivate_alarm(&mut self, member: u64, alarm: AlarmType) -> Vec<AlarmMember> {
        let matches = |&(m, a): &(u64, i32)| {
            (member == 0 || m == member) && (alarm == AlarmType::None || a == alarm as i32)
        };
        let cleared: Vec<(u64, i32)> = self.alarms.iter().copied().filter(matches).collect();
        for a in &cleared {
            self.alarms.remove(a);
        }
        if !cleared.is_empty() {
            self.commit_membership();
        }
        cleared
            .into_iter()
            .map(|(m, a)| alarm_member(m, a))
            .collect()
    }

    /// The raised alarms (of `member`, 0: all).
    pub fn alarms(&self, member: u64) -> Vec<AlarmMember> {
        self.alarms
            .iter()
            .filter(|(m, _)| member == 0 || *m == member)
            .map(|&(m, a)| alarm_member(m, a))
            .collect()
    }

    /// A new member ID: random, nonzero and unused, as etcd derives them from URLs and time.
    fn new_id(&self) -> u64 {
        loop {
            let id = rand_u64();
            if id != 0 && !self.members.contains_key(&id) {
                return id;
            }
        }
    }
}

fn alarm_member(member_id: u64, alarm: i32) -> AlarmMember {
    AlarmMember { member_id, alarm }
}

fn valid_url(u: &str) -> bool {
    (u.starts_with("http://") || u.starts_with("https://")) && u.len() > "https://".len()
}

/// A random u64 from the process's hasher seeds (no extra dependency for one number).
pub(crate) fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> (Members, [u64; 3]) {
        let mut m = Members::new(7);
        let ids = ["cp-0", "cp-1", "cp-2"].map(|n| {
            m.start(
                n,
                &format!("https://{n}:2380"),
                &format!("https://{n}:2379"),
            )
        });
        (m, ids)
    }

    #[test]
    fn the_first_member_leads_and_ids_stay_with_members() {
        let (m, [a, b, c]) = three();
        assert_eq!(m.leader(), Some(a));
        assert_eq!(m.term(), 1);
        let again = m.by_name("cp-1").map(|x| x.id);
        assert_eq!(again, Some(b));
        assert_eq!(m.list().len(), 3);
        assert!(m.get(c).is_some());
    }

    #[test]
    fn an_image_gives_back_ids_leader_term_and_alarms_and_changes_count_membership_only() {
        let (mut m, [a, _, c]) = three();
        m.activate_alarm(c, AlarmType::Nospace);
        let before = m.changes();
        m.commit(); // a key written: not a membership change
        assert_eq!(m.changes(), before);
        let back = Members::restore(m.image());
        assert_eq!(back.image(), m.image());
        assert_eq!(back.leader(), Some(a));
        assert_eq!(back.by_name("cp-2").map(|x| x.id), Some(c));
        assert_eq!(back.alarms(c).len(), 1);
        m.remove(a).expect("a is a member");
        assert!(m.changes() > before, "a removal is a membership change");
    }

    #[test]
    fn a_down_leader_hands_over_while_a_majority_is_up_and_none_leads_without_one() {
        let (mut m, [a, b, c]) = three();
        assert!(m.set_down(a, true));
        assert!(!m.set_down(a, true), "already down");
        let leader = m.leader().expect("a majority up leads");
        assert!(leader == b || leader == c, "a member up leads");
        assert_eq!(m.move_leader(leader, a), Err(MemberError::BadTransferee));
        let other = if leader == b { c } else { b };
        assert!(m.has_quorum());
        m.set_down(leader, true);
        assert!(!m.has_quorum());
        assert_eq!(m.leader(), None, "two of three down: no quorum, no leader");
        assert_eq!(m.first_up(), Some(other));
        m.set_down(a, false);
        let back = m.leader().expect("a majority back elects a leader");
        assert!(back == a || back == other);
        m.set_down(leader, false);
        assert_eq!(m.leader(), Some(back), "a leader up stays");
        assert!(m.image().alarms.is_empty() && !m.is_down(leader));
    }

    #[test]
    fn removing_the_leader_elects_another_and_raises_the_term() {
        let (mut m, [a, b, c]) = three();
        m.remove(a).expect("a is a member");
        let leader = m.leader().expect("someone leads");
        assert!(leader == b || leader == c);
        assert_eq!(m.term(), 2);
        assert_eq!(m.remove(a), Err(MemberError::NotFound));
        m.remove(b).expect("b is a member");
        assert_eq!(m.remove(c), Err(MemberError::LastMember));
    }

    #[test]
    fn only_the_leader_moves_leadership_and_only_to_a_started_voter() {
        let (mut m, [a, b, _]) = three();
        assert_eq!(m.move_leader(b, b), Err(MemberError::NotLeader));
        let learner = m
            .add(vec!["https://cp-3:2380".into()], true)
            .expect("one learner is allowed");
        assert_eq!(
            m.move_leader(a, learner.id),
            Err(MemberError::BadTransferee)
        );
        m.move_leader(a, b).expect("b is a started voter");
        assert_eq!(m.leader(), Some(b));
        assert_eq!(m.term(), 2);
    }

    #[test]
    fn an_added_member_starts_under_its_id_and_learners_are_promoted() {
        let (mut m, _) = three();
        let added = m
            .add(vec!["https://cp-3:2380".into()], true)
            .expect("a new peer URL");
        assert_eq!(
            m.add(vec!["https://cp-3:2380".into()], false),
            Err(MemberError::PeerUrlExists)
        );
        assert_eq!(
            m.add(vec!["https://cp-4:2380".into()], true),
            Err(MemberError::TooManyLearners)
        );
        assert_eq!(m.get(added.id).map(|x| x.name.as_str()), Some(""));
        let started = m.start("cp-3", "https://cp-3:2380", "https://cp-3:2379");
        assert_eq!(started, added.id);
        m.promote(added.id).expect("a learner");
        assert_eq!(m.promote(added.id), Err(MemberError::NotLearner));
    }

    #[test]
    fn alarms_are_raised_listed_and_cleared_per_member() {
        let (mut m, [a, b, _]) = three();
        assert_eq!(m.activate_alarm(a, AlarmType::Nospace).len(), 1);
        m.activate_alarm(b, AlarmType::Corrupt);
        assert_eq!(m.alarms(0).len(), 2);
        assert_eq!(m.alarms(a).len(), 1);
        assert_eq!(m.deactivate_alarm(0, AlarmType::Nospace).len(), 1);
        assert_eq!(m.alarms(0).len(), 1);
        m.remove(b).expect("b is a member");
        assert!(m.alarms(0).is_empty());
    }
}
