// Sign-in: a dashboard the server refuses (no token where reading needs one, or one that no longer
// holds) shows a form; a token pasted there, or carried by a link's fragment (`/#token=…`, which
// never reaches a server or a proxy log), is traded for an HttpOnly, SameSite=Strict cookie
// (POST api/session) that the WebSocket and the API accept. The token never goes in a URL the page
// requests, and the page's scripts never see the cookie. Sign out clears it (DELETE api/session).
// A link's token is never traded unasked: anyone can send a link, and one that signed its visitor
// in as someone else (replacing their own session) would show them another's tasks as theirs and
// take what they publish as that someone's. The form comes up filled in, saying so, and the
// visitor signs in with it or goes on without. Where the server has identity providers (`oidc`),
// the form offers "Sign in with NAME" too: a plain link to auth/login, which sends the browser to
// the provider and back with the same HttpOnly cookie.

import { setGrant } from './access.js';
import { appURL } from './base.js';

/** The token of a `#token=…` fragment, taken out of the address bar (and so out of history). */
export function takeFragmentToken(location, history) {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!match) return '';
  history.replaceState(history.state, '', location.pathname + location.search);
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return match[1];
  }
}

async function session(method, body) {
  const url = appURL('api/session');
  const init = { method, credentials: 'same-origin', headers: {} };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(url, init);
  const answer = await r.json().catch(() => ({}));
  return { ok: r.ok, status: r.status, answer };
}

export class SignIn {
  /**
   * @param {object} o
   * @param {HTMLFormElement} o.form        the sign-in form (hidden until it is needed)
   * @param {HTMLElement} o.reason          where the form says why it is shown
   * @param {HTMLInputElement} o.input      the token field
   * @param {HTMLElement} [o.providers]     where the identity providers' sign-in links go
   * @param {HTMLButtonElement} o.signOut   shown while signed in
   * @param {HTMLElement} o.who             whom the page is signed in as
   * @param {() => void} o.onShown          the form replaced the dashboard (the splash ends)
   */
  constructor({ form, reason, input, providers, signOut, who, onShown }) {
    this.form = form;
    this.providersEl = providers;
    this.providersAsked = false;
    this.reasonEl = reason;
    this.input = input;
    this.signOutButton = signOut;
    this.who = who;
    this.onShown = onShown || (() => {});
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.submit(this.input.value.trim());
    });
    signOut.addEventListener('click', () => this.signOut());
    // A sign-in link opened on a page already showing (only its fragment changes, so no load).
    window.addEventListener('hashchange', async () => {
      const token = takeFragmentToken(location, history);
      if (token) this.offer(token, await session('GET'));
    });
  }

  /** Before anything else: a sign-in link's token is offered (the visitor decides); then the page
   *  learns what it may do. Resolves to true when the page may go on and watch, false when it must
   *  sign in. */
  async start() {
    const token = takeFragmentToken(location, history);
    const current = await session('GET');
    if (token) {
      this.offer(token, current);
      return false;
    }
    if (!current.ok) {
      this.show(current.answer.message || `the server answered ${current.status}`);
      return false;
    }
    setGrant(current.answer);
    this.showSignedIn(current.answer);
    if (!current.answer.read || current.answer.read.length === 0) {
      this.show('This server shows nothing without a token.');
      return false;
    }
    return true;
  }

  /** The form, filled in with a link's token, asking before it signs in (or replaces a session). */
  offer(token, current) {
    this.input.value = token;
    const signedIn = current.ok && current.answer.signedIn;
    this.show(
      'A link offers a token to sign in with. Sign in only if you asked for this link' +
        (signedIn ? `: it replaces your session as ${current.answer.name}.` : '.') +
        ' Reload the page to go on without it.',
    );
  }

  showSignedIn(grant) {
    this.signOutButton.hidden = !grant.signedIn;
    this.who.hidden = !grant.signedIn;
    this.who.textContent = grant.signedIn ? grant.name : '';
  }

  /** Shows the form with the reason (a refused socket's close reason, a refused token's message). */
  show(reason) {
    this.reasonEl.textContent = reason || '';
    this.form.hidden = false;
    document.body.dataset.signin = 'shown';
    this.onShown();
    this.input.focus();
    this.offerProviders();
  }

  /** "Sign in with NAME" for each identity provider the server names (none: nothing shown). */
  async offerProviders() {
    if (!this.providersEl || this.providersAsked) return;
    this.providersAsked = true;
    const r = await fetch(appURL('auth/providers'), { credentials: 'same-origin' }).catch(() => null);
    if (!r || !r.ok) return;
    const { providers = [] } = await r.json().catch(() => ({}));
    for (const p of providers) {
      const link = document.createElement('a');
      link.href = appURL(p.login);
      link.className = 'signin-provider';
      link.textContent = `Sign in with ${p.name}`;
      this.providersEl.append(link);
    }
    this.providersEl.hidden = providers.length === 0;
  }

  async submit(token) {
    if (!token) {
      this.show('Paste a token first.');
      return;
    }
    const signed = await session('POST', { token });
    if (!signed.ok) {
      this.show(signed.answer.message || `the server refused the token (${signed.status})`);
      return;
    }
    this.input.value = '';
    // The page starts over with the cookie: the grant, the socket and every card anew.
    location.replace(location.pathname + location.search);
  }

  async signOut() {
    await session('DELETE');
    location.replace(location.pathname + location.search);
  }
}
