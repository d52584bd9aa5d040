"""Hand the infra stack's outputs to a Chalice stage, in a file git does not track.

    python infra/chalice_env.py --stage prod                      # reads stack ltm-prod
    python infra/chalice_env.py --stage prod --stack my-ltm
    aws cloudformation describe-stacks --stack-name ltm-prod \\
        --query 'Stacks[0].Outputs' > outputs.json
    python infra/chalice_env.py --stage prod --outputs outputs.json

The variables below go to ``chalicelib/stage_settings.json`` under
``stages.<stage>`` (other stages kept), which is gitignored and deployed with
``chalicelib``; the app applies them at start (``chalicelib/stage_settings.py``).
The tracked ``.chalice/config.json`` is never written, so ``git pull && chalice
deploy`` keeps working after upstream changes it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ROOT / "chalicelib" / "stage_settings.json"
CONFIG = ROOT / ".chalice" / "config.json"

# stack output -> the environment variable the app reads
OUTPUT_TO_ENV = {
    "TableName": "LTM_DYNAMODB_TABLE",
    "UserPoolId": "LTM_COGNITO_USER_POOL_ID",
    "UserPoolClientId": "LTM_COGNITO_CLIENT_ID",
    "CognitoDomain": "LTM_COGNITO_DOMAIN",
}


def outputs_from_stack(stack: str, region: str | None) -> list[dict[str, Any]]:
    import boto3

    cfn = boto3.client("cloudformation", region_name=region)
    return list(cfn.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", []))


def apply(settings: dict[str, Any], stage: str, outputs: list[dict[str, Any]]) -> dict[str, str]:
    """Set the stage's variables from ``outputs`` (as CloudFormation lists them); return them."""
    values = {o["OutputKey"]: o["OutputValue"] for o in outputs}
    missing = [key for key in OUTPUT_TO_ENV if key not in values]
    if missing:
        raise SystemExit(f"the stack has no output {', '.join(missing)}: is it infra/ltm.yaml?")
    variables = settings.setdefault("stages", {}).setdefault(stage, {})
    changed = {OUTPUT_TO_ENV[key]: values[key] for key in OUTPUT_TO_ENV}
    variables.update(changed)
    return changed


def _earlier_edit(config: Path, stage: str) -> bool:
    """Whether an earlier version of this script wrote the stack's values into the tracked
    config (a Cognito id there): that local change is what stops ``git pull``."""
    try:
        doc = json.loads(config.read_text())
    except (OSError, ValueError):
        return False
    env = doc.get("stages", {}).get(stage, {}).get("environment_variables", {})
    return any(env.get(name) for name in OUTPUT_TO_ENV.values() if "COGNITO" in name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", required=True, help="Chalice stage (dev, prod)")
    parser.add_argument("--stack", help="CloudFormation stack name (default: ltm-<stage>)")
    parser.add_argument("--region", help="the stack's region (default: from the AWS config)")
    parser.add_argument("--outputs", type=Path, help="a JSON file of the stack's Outputs instead")
    parser.add_argument(
        "--settings", type=Path, default=SETTINGS, help="the untracked stage settings to update"
    )
    args = parser.parse_args(argv)
    if args.outputs:
        outputs = json.loads(args.outputs.read_text())
    else:
        outputs = outputs_from_stack(args.stack or f"ltm-{args.stage}", args.region)
    try:
        settings = json.loads(args.settings.read_text())
    except FileNotFoundError:
        settings = {}
    changed = apply(settings, args.stage, outputs)
    tmp = args.settings.with_name(f".{args.settings.name}.{os.getpid()}")
    tmp.write_text(json.dumps(settings, indent=2) + "\n")
    os.replace(tmp, args.settings)
    for name, value in changed.items():
        print(f"{args.stage}: {name}={value}", file=sys.stderr)
    print(f"written to {args.settings} (not tracked by git)", file=sys.stderr)
    if _earlier_edit(CONFIG, args.stage):
        print(
            f"note: {CONFIG} still holds values an earlier chalice_env.py wrote there; they"
            " now live in the file above, so restore the tracked one:"
            " git checkout .chalice/config.json",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
