/** Text into HTML: everything the agent, the model or a task wrote is untrusted and goes through here. */
export function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

/**
 * The page's Content-Security-Policy: no script, no network, no frames; only
 * its own inline styles. A page that escaped something wrong still runs nothing.
 */
export const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'";
