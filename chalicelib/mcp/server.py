"""The MCP server ltm offers, defined once for every transport: tools, prompts, resources.

``build_server`` wraps the SDK's low-level ``Server`` around a tools module
(names, descriptions, input schemas and behaviour: ``call(name, arguments)``
never raises) and a memory module (the ``resume`` prompt and the packets as
resources). The stdio shim (``ltm mcp``) and the remote ``/mcp`` endpoint
(``chalicelib.mcp.http``) both serve what this builds; only where the packets
come from differs (the CLI's client, or the service layer as the request's
signed-in user). Blocking calls run in worker threads, off the event loop.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("ltm.mcp")

# Where a tool result carries its data for programs (``_meta``, which clients keep from
# the model): never in ``structuredContent``, see ``call_tool``.
DATA_KEY = "ltm/data"


def build_server(tools: Any, memory: Any, *, workdir: bool = True) -> Any:
    """The SDK server over ``tools`` (the catalogue and ``call``) and ``memory`` (the
    ``resume`` prompt and the packet resources): the same definitions whichever transport
    serves them. ``workdir``: served where the user works (the stdio shim), whose project
    ``here`` means; a server's ``/mcp`` offers no ``here`` and promises no project."""
    import mcp_types as types
    from mcp.server.lowlevel.server import Server
    from mcp.shared.exceptions import MCPError

    from .. import __version__

    catalogue = tools.catalogue(workdir=workdir)
    listed = [
        types.Tool(
            name=tool.name,
            title=tool.title,
            description=tool.description,
            input_schema=tool.input_schema,
            annotations=types.ToolAnnotations(
                title=tool.title,
                read_only_hint=tool.read_only,
                destructive_hint=tool.destructive,
                idempotent_hint=tool.idempotent,
                # A memory tool's world is closed (the specification's own example): every
                # tool reads or writes ltm's packets and nothing else. Left out, it is true.
                open_world_hint=False,
            ),
        )
        for tool in catalogue.values()
    ]

    def one_page(params: types.PaginatedRequestParams | None) -> None:
        """Every list here is whole in one page, with no ``nextCursor``: a cursor is one
        this server never gave, and the specification has that refused as invalid params
        (https://modelcontextprotocol.io/specification/2025-11-25/server/utilities/pagination)
        rather than answered with the first page again."""
        if params is not None and params.cursor is not None:
            raise MCPError(
                types.INVALID_PARAMS,
                "unknown cursor: this server lists everything in one page and gives no"
                " cursor; list again without one",
            )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        one_page(params)
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        import anyio

        if params.name not in catalogue:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {params.name!r}; ltm's tools are: {', '.join(catalogue)}",
            )
        log.debug("call %s", params.name)
        reply = await anyio.to_thread.run_sync(tools.call, params.name, params.arguments)
        if reply.is_error:
            log.info("%s failed: %s", params.name, reply.text.splitlines()[0])
        # The text is the answer, written for the model, with packet text fenced inside it
        # (``ltm.resume.frame``). Clients that find ``structuredContent`` in a result hand
        # the model that alone and drop the text (Claude Code, VS Code: reported in
        # https://github.com/anthropics/claude-code/issues/79944 and
        # https://github.com/microsoft/vscode/issues/290063): resume would give it no
        # packet, and ls and search their goals and snippets unfenced. So the data goes in
        # ``_meta``, which those clients keep from the model (the specification lets a
        # tool without an outputSchema leave structuredContent out). A client that shows
        # the model ``_meta`` as well (some do) shows it the rows again, outside the fence.
        return types.CallToolResult(
            content=[types.TextContent(text=reply.text)],
            _meta=None if reply.data is None else {DATA_KEY: reply.data},
            is_error=reply.is_error,
        )

    async def _off_loop(function: Any, *args: Any) -> Any:
        """Run a blocking memory call in a worker thread; its failure is the client's error."""
        import anyio

        try:
            return await anyio.to_thread.run_sync(function, *args)
        except tools.ToolError as exc:
            raise MCPError(types.INVALID_PARAMS, exc.message) from None

    prompt_description, prompt_arguments = memory.prompt_text(workdir=workdir)
    prompt = types.Prompt(
        name=memory.PROMPT_NAME,
        title="Resume prior work",
        description=prompt_description,
        arguments=[
            types.PromptArgument(name=name, description=doc, required=False)
            for name, doc in prompt_arguments
        ],
    )

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        one_page(params)
        return types.ListPromptsResult(prompts=[prompt])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != memory.PROMPT_NAME:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}; ltm has resume")
        description, text = await _off_loop(memory.resume_prompt, params.arguments)
        message = types.PromptMessage(role="user", content=types.TextContent(text=text))
        return types.GetPromptResult(description=description, messages=[message])

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        one_page(params)
        found = await _off_loop(memory.list_resources)
        return types.ListResourcesResult(
            resources=[types.Resource(mime_type="text/markdown", **r) for r in found]
        )

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        one_page(params)
        template = types.ResourceTemplate(
            name="packet",
            title="An ltm memory packet",
            uri_template=memory.URI_TEMPLATE,
            description="A packet's resume block, by id or unique prefix.",
            mime_type="text/markdown",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        text = await _off_loop(memory.read_resource, uri)
        contents = types.TextResourceContents(uri=uri, mime_type="text/markdown", text=text)
        return types.ReadResourceResult(contents=[contents])

    return Server(
        "ltm",
        version=__version__,
        title="ltm: long-term memory for coding agents",
        instructions=tools.INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
