import type { PolicyRule } from '../helm.js';

/** What the API server authorises a request by (the attributes RBAC sees). */
export interface RequestAttributes {
  verb: string;
  apiGroup: string;
  resource: string;
  subresource: string | undefined;
  namespace: string | undefined;
  name: string | undefined;
}

/** The rules a service account holds: from Roles in its namespace, and from ClusterRoles. */
export interface Grants {
  namespace: string;
  namespaced: PolicyRule[];
  cluster: PolicyRule[];
}

function ruleAllows(rule: PolicyRule, request: RequestAttributes): boolean {
  const resource = request.subresource ? `${request.resource}/${request.subresource}` : request.resource;
  const has = (list: string[] | undefined, value: string) => (list ?? []).some((item) => item === '*' || item === value);
  return has(rule.apiGroups, request.apiGroup) && has(rule.resources, resource) && has(rule.verbs, request.verb);
}

/** RBAC as the API server applies it: a Role grants only in its namespace; a ClusterRole everywhere. */
export function authorize(grants: Grants, request: RequestAttributes): boolean {
  const roleApplies = request.namespace === grants.namespace;
  return (
    grants.cluster.some((rule) => ruleAllows(rule, request)) ||
    (roleApplies && grants.namespaced.some((rule) => ruleAllows(rule, request)))
  );
}
